package xdp

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	c := &Counters{EtherTypes: map[uint16]Count{0x0806: {3, 126, 0}, 0x88cc: {1, 60, 1}}, Malformed: map[Reason]uint64{IPv4IHL: 2}}
	c.Classes[IPv4TCP] = Count{100, 150000, 0}
	c.Classes[IPv4ICMP] = Count{10, 980, 10}
	c.Classes[NonIP] = Count{4, 186, 1}
	c.Classes[Malformed] = Count{2, 120, 0}
	c.Total = Count{116, 151286, 11}
	c.DroppedClass, c.DroppedEtherType = 10, 1
	att := &Attachment{Interface: "eth0", Ifindex: 2, Mode: ModeGeneric, DriverModeError: errors.New("the driver has no native XDP support")}
	pol := Policy{Drop: setOf(IPv4ICMP), DropEtherTypes: []uint16{0x88cc}}
	return NewReport(att, pol, time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC), 10*time.Second, c)
}

func TestReportText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"xdp on eth0 (ifindex 2), generic mode (driver mode unavailable: the driver has no native XDP support), 10.0s\n",
		"policy: drop ipv4/icmp; drop EtherType 0x88cc (LLDP)\n",
		"   ipv4/tcp      100  150000        0  10.0\n",
		"  ipv4/icmp       10     980       10   1.0\n",
		"      total      116  151286       11  11.6\n",
		"     0x0806   ARP        3    126        0\n",
		"     0x88cc  LLDP        1     60        1\n",
		"malformed frames (passed):\n",
		"  ipv4  header length (IHL) below 5       2\n",
		"dropped by rule: class 10, UDP port 0, EtherType 1, malformed 0\n",
		"lost events: none (EtherType table full 0)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// Every class has a row, even an empty one.
	for _, c := range Classes() {
		if !strings.Contains(out, " "+c.String()+" ") {
			t.Errorf("no row for %s", c)
		}
	}
}

func TestReportJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Interface       string `json:"interface"`
		Mode            string `json:"mode"`
		DriverModeError string `json:"driver_mode_error"`
		Policy          struct {
			Drop           []string `json:"drop"`
			DropEtherTypes []string `json:"drop_ethertypes"`
		} `json:"policy"`
		Elapsed int64  `json:"elapsed_ns"`
		Command string `json:"command"`
		Started string `json:"started_at"`
		Total   Count  `json:"total"`
		Classes []struct {
			Class string  `json:"class"`
			PPS   float64 `json:"pps"`
			Count
		} `json:"classes"`
		EtherTypes []EtherTypeRow `json:"ethertypes"`
		Malformed  []struct {
			Reason string `json:"reason"`
			Frames uint64 `json:"frames"`
		} `json:"malformed"`
		Losses []struct {
			What  string `json:"what"`
			Count uint64 `json:"count"`
		} `json:"losses"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.Interface != "eth0" || got.Mode != "generic" || got.DriverModeError == "" || got.Elapsed != 10e9 ||
		got.Command != "probe xdp" || got.Started != "2026-11-24T03:00:00Z" {
		t.Errorf("header fields: %+v", got)
	}
	if strings.Join(got.Policy.Drop, ",") != "ipv4/icmp" || strings.Join(got.Policy.DropEtherTypes, ",") != "0x88cc" {
		t.Errorf("policy: %+v", got.Policy)
	}
	if len(got.Classes) != int(numClasses) || got.Classes[0].Class != "ipv4/tcp" || got.Classes[0].Packets != 100 || got.Classes[0].PPS != 10 {
		t.Errorf("classes: %+v", got.Classes)
	}
	if len(got.EtherTypes) != 2 || got.EtherTypes[0].EtherType != 0x0806 || got.EtherTypes[0].Name != "ARP" {
		t.Errorf("ethertypes: %+v", got.EtherTypes)
	}
	if len(got.Malformed) != len(Reasons()) || got.Malformed[IPv4IHL-1].Reason != "ipv4/bad-ihl" || got.Malformed[IPv4IHL-1].Frames != 2 {
		t.Errorf("malformed: %+v", got.Malformed)
	}
	if len(got.Losses) != 1 || got.Losses[0].Count != 0 {
		t.Errorf("losses: %+v", got.Losses)
	}
	if got.Total.Packets != 116 {
		t.Errorf("total: %+v", got.Total)
	}
}

func TestCountersSub(t *testing.T) {
	a := sampleReport().Counters
	d := a.Sub(&Counters{})
	if d.Total != a.Total || d.Classes != a.Classes || d.EtherTypes[0x0806] != a.EtherTypes[0x0806] || d.DroppedClass != 10 {
		t.Errorf("x - 0 != x: %+v", d)
	}
	z := a.Sub(a)
	if z.Total != (Count{}) || z.Malformed[IPv4IHL] != 0 || z.DroppedClass != 0 || z.EtherTypes[0x88cc] != (Count{}) {
		t.Errorf("x - x != 0: %+v", z)
	}
}

func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	cur := sampleReport().Counters
	att := &Attachment{Interface: "eth0", Mode: ModeDriver}
	writeProgress(&b, att, 4*time.Second, cur, 2*time.Second, cur)
	want := "xdp eth0 [driver] 4.00s: 58 pkt/s (ipv4/tcp 50, ipv4/icmp 5, non-ip 2, malformed 1), 0.61 Mbit/s, dropped 5.5/s, malformed 1/s; total 116 packets, 11 dropped\n"
	if b.String() != want {
		t.Errorf("progress line:\n got %q\nwant %q", b.String(), want)
	}
}
