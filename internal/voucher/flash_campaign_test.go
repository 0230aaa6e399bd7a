package voucher

import "testing"

func TestCampaignGateCode_NamesTheCampaignAndNoVoucher(t *testing.T) {
	code := CampaignGateCode(42)
	if code != "~C42" || !IsCampaignGate(code) {
		t.Fatalf("CampaignGateCode(42) = %q", code)
	}
	if id, ok := CampaignOfGate(code); !ok || id != 42 {
		t.Errorf("CampaignOfGate(%q) = %d, %v", code, id, ok)
	}
	// No code a caller can give names a campaign's gate.
	for _, c := range []string{"C42", "SALE", "~Cx", "~C"} {
		if _, ok := CampaignOfGate(c); ok {
			t.Errorf("CampaignOfGate(%q) names a campaign", c)
		}
		if ValidateCode(c) == nil && IsCampaignGate(c) {
			t.Errorf("%q is a valid voucher code and a campaign's gate", c)
		}
	}
}
