package dma

// WithTables returns o with the probe's device, latency and stamp tables
// shrunk to the given entries, so that tests can force each table-full
// loss.
func WithTables(o Options, devices, hists, stamps uint32) Options {
	o.tables = tableSizes{devices, hists, stamps}
	return o
}

// FillStampTable puts a stamp for a thread that does not exist in the
// probe's stamp table, so that with a one-entry table every map call
// finds it full.
func FillStampTable(p *Probe) error {
	m := p.objs.Stamps
	return m.Put(^uint64(0), make([]byte, m.ValueSize()))
}
