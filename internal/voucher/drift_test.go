package voucher

import (
	"slices"
	"testing"
)

// codesDiffering counts the gate's orders in flight and the database's
// orders the gate released already, so a sale in motion differs nowhere;
// what is left over is named, sorted, at most maxCodesDiffering codes.
func TestCodesDiffering_CountsOrdersInFlightAndReleasedSince(t *testing.T) {
	db := GateSnapshot{
		Codes:      map[string]int{"A": 1, "B": 2, "R": 1},
		OrderCodes: map[string]string{"o1": "A", "o2": "B", "o3": "B", "r1": "R"},
	}
	gate := GateSnapshot{
		// o4 on C is in flight (not in the database yet); r1 was released
		// at the gate, the database not told yet.
		Codes:      map[string]int{"A": 1, "B": 2, "C": 1},
		OrderCodes: map[string]string{"o1": "A", "o2": "B", "o3": "B", "o4": "C"},
	}
	if got := codesDiffering(db, gate, []string{"o4"}, []string{"r1"}); len(got) != 0 {
		t.Errorf("a sale in motion: %v differ, want none", got)
	}
	gate.Codes["B"] = 1     // forgot a use the database holds
	gate.Codes["Z"] = 1     // counts a use the database does not
	delete(gate.Codes, "C") // lost the in-flight order's use
	if got, want := codesDiffering(db, gate, []string{"o4"}, []string{"r1"}), []string{"B", "C", "Z"}; !slices.Equal(got, want) {
		t.Errorf("codesDiffering = %v, want %v", got, want)
	}
	many := GateSnapshot{Codes: map[string]int{}}
	for i := range maxCodesDiffering + 10 {
		many.Codes[string(rune('a'+i%26))+string(rune('a'+i/26))] = 1
	}
	if got := codesDiffering(GateSnapshot{}, many, nil, nil); len(got) != maxCodesDiffering || !slices.IsSorted(got) {
		t.Errorf("%d codes named (sorted %v), want the first %d", len(got), slices.IsSorted(got), maxCodesDiffering)
	}
}
