package vm

// GuestInit is the entry point when the hotlane binary runs as /init inside
// the VM. It never returns.
func GuestInit() {
	panic("TODO")
}
