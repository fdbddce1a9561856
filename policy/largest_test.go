package policy

import "testing"

// Largest must fill what the classifier's loops run over: every class,
// every rule slot, every match kind, and more than one device set.
func TestLargestFillsTheClassifier(t *testing.T) {
	table, err := Largest().Compile("")
	if err != nil {
		t.Fatal(err)
	}
	if got := table.NrClasses(); got != MaxClasses {
		t.Errorf("%d classes, want %d", got, MaxClasses)
	}
	if got := table.NrRules(); got != MaxRules {
		t.Errorf("%d rules, want %d", got, MaxRules)
	}
	for _, k := range []MatchKind{MatchCommPrefix, MatchCommExact, MatchPcommPrefix, MatchPcommExact,
		MatchPID, MatchTGID, MatchCgroup, MatchSchedExt, MatchDevice, MatchDeviceProcess} {
		if MatchKind(table.RuleKinds())&k == 0 {
			t.Errorf("no rule of kind %#x", k)
		}
	}
	if len(table.DeviceSetIdle) < 2 {
		t.Errorf("%d device sets, want several", len(table.DeviceSetIdle))
	}
}
