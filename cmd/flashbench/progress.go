package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// progress is a one-line bar on stderr, redrawn from a counter by its own
// goroutine, so the workers pay one atomic add per request and no lock. (A
// progress library would take a lock per update; this is all it needs.)
type progress struct {
	stop chan struct{}
	done chan struct{}
}

func startProgress(w io.Writer, name string, total int64, count *atomic.Int64) *progress {
	p := &progress{stop: make(chan struct{}), done: make(chan struct{})}
	tty := isTerminal(w)
	every := 200 * time.Millisecond
	if !tty {
		every = 2 * time.Second // a log, not a terminal: a line now and then
	}
	start := time.Now()
	draw := func(final bool) {
		n := count.Load()
		el := time.Since(start)
		const width = 30
		filled := int(float64(width) * float64(n) / float64(max(total, 1)))
		bar := strings.Repeat("=", min(filled, width)) + strings.Repeat(" ", width-min(filled, width))
		rate := float64(n) / max(el.Seconds(), 1e-9)
		line := fmt.Sprintf("%-16s [%s] %7d/%d %8.0f/s %5.1fs", name, bar, n, total, rate, el.Seconds())
		switch {
		case tty && final:
			fmt.Fprintf(w, "\r%s\n", line)
		case tty:
			fmt.Fprintf(w, "\r%s", line)
		default:
			fmt.Fprintln(w, line)
		}
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				draw(true)
				return
			case <-t.C:
				draw(false)
			}
		}
	}()
	return p
}

func (p *progress) finish() {
	close(p.stop)
	<-p.done
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
