package loader

import (
	"testing"
	"time"
)

// Two readings of KtimeNow around a sleep are at least the sleep apart.
func TestKtimeNowAdvancesWithTheMonotonicClock(t *testing.T) {
	before, err := KtimeNow()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	after, err := KtimeNow()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(after - before); after < before || d < 10*time.Millisecond {
		t.Errorf("KtimeNow moved %v across a 10ms sleep", d)
	}
}
