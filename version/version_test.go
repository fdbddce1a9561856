package version

import (
	"runtime/debug"
	"testing"
)

func TestStringSaysTheCommit(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/hotlane/hotlane", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "1198384abc"},
			{Key: "vcs.time", Value: "2026-11-23T20:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	want := "hotlane (devel) (commit 1198384abc, modified, 2026-11-23T20:00:00Z) go1.26.0"
	if got := fromBuildInfo(bi).String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	bi.Settings = nil
	bi.Main.Version = "v0.3.0"
	if got, want := fromBuildInfo(bi).String(), "hotlane v0.3.0 go1.26.0"; got != want {
		t.Errorf("without VCS stamps: got %q, want %q", got, want)
	}
}
