package verify

import "testing"

// The per-task table's size grows with its entries, at about 16 KiB each,
// as --max-tasks's help says: 65536 tasks are about 1 GiB.
func TestTaskTableBytes(t *testing.T) {
	small, err := TaskTableBytes(1024)
	if err != nil {
		t.Fatal(err)
	}
	big, err := TaskTableBytes(65536)
	if err != nil {
		t.Fatal(err)
	}
	if per := (big - small) / (65536 - 1024); per < 15<<10 || per > 17<<10 {
		t.Errorf("%d bytes per task, want about 16 KiB", per)
	}
	if big < 900<<20 {
		t.Errorf("65536 tasks: %d bytes, want about 1 GiB", big)
	}
}
