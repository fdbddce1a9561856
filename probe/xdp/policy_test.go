package xdp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDrop(t *testing.T) {
	good := map[string]ClassSet{
		"":                 0,
		"icmp":             setOf(IPv4ICMP),
		"icmp,icmpv6":      setOf(IPv4ICMP, IPv6ICMPv6),
		" ICMP , IcmpV6 ,": setOf(IPv4ICMP, IPv6ICMPv6),
		"udp":              setOf(IPv4UDP, IPv6UDP),
		"ipv6/udp":         setOf(IPv6UDP),
		"frag,malformed":   setOf(IPv4Frag, IPv6Frag, Malformed),
		"ipv4":             setOf(IPv4TCP, IPv4UDP, IPv4ICMP, IPv4Frag, IPv4Other),
		"non-ip":           setOf(NonIP),
	}
	for in, want := range good {
		got, err := ParseDrop(in)
		if err != nil || got != want {
			t.Errorf("ParseDrop(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	_, err := ParseDrop("tcp,icpm")
	wantErr := `--drop: unknown protocol "icpm" (did you mean "icmp"?); valid: tcp, udp, icmp, icmpv6, frag, other, ipv4, ipv6, non-ip, malformed, or one class such as ipv4/udp or ipv6/frag`
	if err == nil || err.Error() != wantErr {
		t.Errorf("ParseDrop(tcp,icpm) error:\n got %v\nwant %s", err, wantErr)
	}
	if !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("%v does not match ErrInvalidPolicy", err)
	}
}

func TestParsePorts(t *testing.T) {
	got, err := ParsePorts("53, 123,5000-5010,65535")
	want := []PortRange{{53, 53}, {123, 123}, {5000, 5010}, {65535, 65535}}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("ParsePorts = %v, %v; want %v", got, err, want)
	}
	for in, msg := range map[string]string{
		"0":       `bad port "0": want a port 1-65535`,
		"70000":   `bad port "70000"`,
		"dns":     `bad port "dns"`,
		"10-5":    `bad port range "10-5": the first port is above the last`,
		"5-":      `bad port "5-"`,
		"53,-1":   `bad port "-1"`,
		"1-2-3":   `bad port "1-2-3"`,
		"53;123":  `bad port "53;123"`,
		"0x35":    `bad port "0x35"`,
		"1-65536": `bad port "1-65536"`,
	} {
		_, err := ParsePorts(in)
		if err == nil || !strings.HasPrefix(err.Error(), "--allow-udp-ports: "+msg) {
			t.Errorf("ParsePorts(%q) error %v, want it to start with %q", in, err, msg)
		}
	}
}

func TestParseEtherTypes(t *testing.T) {
	got, err := ParseEtherTypes("0x88cc,lldp,ARP,35020,0X9100")
	want := []uint16{0x88cc, 0x88cc, 0x0806, 35020, 0x9100}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("ParseEtherTypes = %#v, %v; want %#v", got, err, want)
	}
	for in, msg := range map[string]string{
		"0x50":    `bad EtherType "0x50": values below 0x0600 are 802.3 frame lengths`,
		"100":     `bad EtherType "100": values below 0x0600`,
		"0x1ffff": `bad EtherType "0x1ffff": want hex such as 0x88cc`,
		"lldpp":   `bad EtherType "lldpp"`,
	} {
		_, err := ParseEtherTypes(in)
		if err == nil || !strings.HasPrefix(err.Error(), "--drop-ethertype: "+msg) {
			t.Errorf("ParseEtherTypes(%q) error %v, want it to start with %q", in, err, msg)
		}
	}
}

func TestPolicyFromFlags(t *testing.T) {
	p, err := PolicyFromFlags("icmp,icmpv6", "53,123", "0x88cc", "")
	want := Policy{Drop: setOf(IPv4ICMP, IPv6ICMPv6), AllowUDPPorts: []PortRange{{53, 53}, {123, 123}}, DropEtherTypes: []uint16{0x88cc}}
	if err != nil || !cmp.Equal(p, want) {
		t.Errorf("PolicyFromFlags = %+v, %v", p, err)
	}
	if s := p.String(); s != "drop ipv4/icmp,ipv6/icmpv6; UDP only to ports 53,123; drop EtherType 0x88cc (LLDP)" {
		t.Errorf("String() = %q", s)
	}
	if s := (Policy{}).String(); s != "count only, drop nothing" {
		t.Errorf("empty policy String() = %q", s)
	}

	_, err = PolicyFromFlags("udp", "53", "", "")
	if err == nil || !strings.Contains(err.Error(), "contradict") {
		t.Errorf("dropping UDP with an allow-list: %v", err)
	}
	_, err = PolicyFromFlags("icmp", "", "", "policy.json")
	if err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("--policy with --drop: %v", err)
	}
	_, err = PolicyFromFlags("", "", "", filepath.Join(t.TempDir(), "missing.json"))
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing policy file: %v", err)
	}
}

func TestParsePolicy(t *testing.T) {
	src := `{
  "drop": ["icmp", "icmpv6", "malformed"],
  "allow_udp_ports": [53, 123, "5000-5010"],
  "drop_ethertypes": ["0x88cc", "arp", 34958]
}`
	p, err := ParsePolicy("p.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{
		Drop:           setOf(IPv4ICMP, IPv6ICMPv6, Malformed),
		AllowUDPPorts:  []PortRange{{53, 53}, {123, 123}, {5000, 5010}},
		DropEtherTypes: []uint16{0x88cc, 0x0806, 0x888e},
	}
	if !cmp.Equal(p, want) {
		t.Errorf("ParsePolicy:\n%s", cmp.Diff(want, p))
	}

	// The JSON form of a policy reads back as the same policy.
	j, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePolicy("round-trip", j)
	if err != nil || !cmp.Equal(back, p) {
		t.Errorf("round trip through %s: %+v, %v", j, back, err)
	}

	for _, empty := range []string{"{}", " { } \n"} {
		if p, err := ParsePolicy("e.json", []byte(empty)); err != nil || !p.Empty() {
			t.Errorf("ParsePolicy(%q) = %+v, %v; want the empty policy", empty, p, err)
		}
	}
}

func TestParsePolicyErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{``, `p.json: empty policy; write a JSON object such as {"drop": ["icmp"]}`},
		{`{"drop": ["icmp",]}`, `p.json:1:18: invalid JSON: invalid character ']' looking for beginning of value`},
		{"{\n  \"drop\": [\"icmp\"]\n", `p.json:3:1: invalid JSON: unexpected end of JSON input`},
		{`{"drop": ["icmp"]} {}`, `p.json:1:20: invalid JSON: invalid character '{' after top-level value`},
		{`["icmp"]`, `p.json:1:1: the policy must be a JSON object such as {"drop": ["icmp"]}, not a list`},
		{"{\n  \"drop\": [\"icmp\"],\n  \"allow_udp_port\": [53]\n}", `p.json:3:3: unknown field "allow_udp_port" (did you mean "allow_udp_ports"?); valid fields: drop, allow_udp_ports, drop_ethertypes`},
		{`{"Drop": ["icmp"]}`, `p.json:1:2: unknown field "Drop" (did you mean "drop"?); valid fields: drop, allow_udp_ports, drop_ethertypes`},
		{`{"drop": ["icmp"], "drop": ["tcp"]}`, `p.json:1:20: field "drop" given twice`},
		{"{\"drop\": [\"icmp\",\n          \"icmp6\"]}", `p.json:2:11: unknown protocol "icmp6" (did you mean "icmp"?); valid: tcp, udp, icmp, icmpv6, frag, other, ipv4, ipv6, non-ip, malformed, or one class such as ipv4/udp or ipv6/frag`},
		{`{"drop": "icmp"}`, `p.json:1:10: "drop" must be a list such as ["icmp", "icmpv6"], not the string "icmp"`},
		{`{"drop": [1]}`, `p.json:1:11: "drop" entries are protocol names such as "icmp", not the number 1`},
		{`{"drop": [["icmp"]]}`, `p.json:1:11: "drop" must be a flat list such as ["icmp", "icmpv6"], not contain a list`},
		{`{"drop": []}`, `p.json:1:11: "drop" is empty; leave it out`},
		{`{"allow_udp_ports": [53, 70000]}`, `p.json:1:26: bad port "70000": want a port 1-65535 or a range such as 5000-5010`},
		{`{"allow_udp_ports": [53, 1.5]}`, `p.json:1:26: bad port "1.5": want a port 1-65535 or a range such as 5000-5010`},
		{`{"allow_udp_ports": ["9-1"]}`, `p.json:1:22: bad port range "9-1": the first port is above the last`},
		{`{"allow_udp_ports": [true]}`, `p.json:1:22: "allow_udp_ports" entries are ports such as 53 or ranges such as "5000-5010", not true`},
		{`{"allow_udp_ports": []}`, `p.json:1:22: "allow_udp_ports" is empty; leave it out to allow every port, or write "drop": ["udp"] to drop all UDP`},
		{`{"allow_udp_ports": null}`, `p.json:1:21: "allow_udp_ports" must be a list such as [53, 123, "5000-5010"], not null`},
		{`{"drop_ethertypes": ["0x0800", 80]}`, `p.json:1:32: bad EtherType "80": values below 0x0600 are 802.3 frame lengths, not EtherTypes`},
		{`{"drop_ethertypes": [{"type": 1}]}`, `p.json:1:22: "drop_ethertypes" must be a flat list such as ["0x88cc", "arp"], not contain an object`},
		{"{\"drop\": [\"udp\"],\n \"allow_udp_ports\": [53]}", `p.json: dropping ipv4/udp,ipv6/udp and allowing UDP ports 53 contradict each other; drop UDP or allow-list its ports, not both`},
		{"{\"drop\": [\n\t\"ipv6/udp\", \"ïcmp\"]}", `p.json:2:14: unknown protocol "ïcmp" (did you mean "icmp"?); valid: tcp, udp, icmp, icmpv6, frag, other, ipv4, ipv6, non-ip, malformed, or one class such as ipv4/udp or ipv6/frag`},
		{`{"drop": ["ïcmp" "x"]}`, `p.json:1:18: invalid JSON: invalid character '"' after array element`}, // columns count characters
	}
	for _, tc := range cases {
		_, err := ParsePolicy("p.json", []byte(tc.src))
		if err == nil {
			t.Errorf("ParsePolicy(%q) succeeded; want %s", tc.src, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("ParsePolicy(%q):\n got %s\nwant %s", tc.src, err, tc.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
		if !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%v does not match ErrInvalidPolicy", err)
		}
	}
}

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "drop.json")
	if err := os.WriteFile(path, []byte(`{"drop": ["icmp"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path)
	if err != nil || p.Drop != setOf(IPv4ICMP) {
		t.Errorf("LoadPolicy = %+v, %v", p, err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\"drop\": [\"icmp\"]\n\"x\": 1}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadPolicy(bad)
	if want := bad + `:2:1: invalid JSON: invalid character '"' after object key:value pair`; err == nil || err.Error() != want {
		t.Errorf("LoadPolicy(bad):\n got %v\nwant %s", err, want)
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"auto": ModeAuto, "driver": ModeDriver, "native": ModeDriver, "generic": ModeGeneric, "SKB": ModeGeneric} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseMode("offload"); err == nil {
		t.Error("ParseMode(offload) succeeded; hotlane never offloads")
	}
}

func TestNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Classes() {
		if seen[c.String()] {
			t.Errorf("class name %s twice", c)
		}
		seen[c.String()] = true
		if got, _ := ParseDrop(c.String()); got != setOf(c) {
			t.Errorf("--drop %s selects %v", c, got)
		}
	}
	for _, r := range Reasons() {
		if strings.HasPrefix(r.String(), "reason(") || r.Description() == "" {
			t.Errorf("reason %d has no name", int(r))
		}
	}
	if EtherTypeName(0x0806) != "ARP" || EtherTypeName(EtherType8023) != "802.3" || EtherTypeName(0x1234) != "" {
		t.Error("EtherTypeName")
	}
}
