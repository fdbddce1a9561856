package xdp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hotlane/hotlane/internal/infile"
	"github.com/hotlane/hotlane/internal/jsonpos"
)

// Policy is what the probe drops; the zero Policy drops nothing and only
// counts. A frame is dropped when any rule matches:
//
//   - its class is in Drop;
//   - it is UDP (IPv4 or IPv6, not a non-first fragment) and AllowUDPPorts
//     is not empty and does not contain its destination port;
//   - its outer EtherType, any of its VLAN tag protocols or its inner
//     EtherType is in DropEtherTypes.
//
// Malformed frames are only dropped when Drop contains Malformed; see the
// package documentation.
type Policy struct {
	Drop           ClassSet
	AllowUDPPorts  []PortRange
	DropEtherTypes []uint16
}

// PortRange is an inclusive range of ports; a single port has Lo == Hi.
type PortRange struct{ Lo, Hi uint16 }

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// Empty reports whether the policy drops nothing.
func (p Policy) Empty() bool {
	return p.Drop == 0 && len(p.AllowUDPPorts) == 0 && len(p.DropEtherTypes) == 0
}

// String says what the policy does in one line, for the report.
func (p Policy) String() string {
	if p.Empty() {
		return "count only, drop nothing"
	}
	var parts []string
	if p.Drop != 0 {
		parts = append(parts, "drop "+p.Drop.String())
	}
	if len(p.AllowUDPPorts) > 0 {
		parts = append(parts, "UDP only to ports "+joinPorts(p.AllowUDPPorts))
	}
	if len(p.DropEtherTypes) > 0 {
		ets := make([]string, len(p.DropEtherTypes))
		for i, t := range p.DropEtherTypes {
			ets[i] = formatEtherType(t)
		}
		parts = append(parts, "drop EtherType "+strings.Join(ets, ","))
	}
	return strings.Join(parts, "; ")
}

func joinPorts(rs []PortRange) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

func formatEtherType(t uint16) string {
	if n := EtherTypeName(t); n != "" {
		return fmt.Sprintf("0x%04x (%s)", t, n)
	}
	return fmt.Sprintf("0x%04x", t)
}

// policyJSON is the policy file's shape; MarshalJSON writes it back.
type policyJSON struct {
	Drop           []string `json:"drop,omitempty"`
	AllowUDPPorts  []string `json:"allow_udp_ports,omitempty"`
	DropEtherTypes []string `json:"drop_ethertypes,omitempty"`
}

// MarshalJSON writes the policy in the policy file's format, with class
// names, port ranges as strings and EtherTypes in hex.
func (p Policy) MarshalJSON() ([]byte, error) {
	var j policyJSON
	for _, c := range p.Drop.Classes() {
		j.Drop = append(j.Drop, c.String())
	}
	for _, r := range p.AllowUDPPorts {
		j.AllowUDPPorts = append(j.AllowUDPPorts, r.String())
	}
	for _, t := range p.DropEtherTypes {
		j.DropEtherTypes = append(j.DropEtherTypes, fmt.Sprintf("0x%04x", t))
	}
	return json.Marshal(j)
}

// Validate checks rules that contradict each other.
func (p Policy) Validate() error {
	if len(p.AllowUDPPorts) > 0 && p.Drop&setOf(IPv4UDP, IPv6UDP) != 0 {
		return &PolicyError{Msg: fmt.Sprintf("dropping %s and allowing UDP ports %s contradict each other; drop UDP or allow-list its ports, not both",
			(p.Drop & setOf(IPv4UDP, IPv6UDP)).String(), joinPorts(p.AllowUDPPorts))}
	}
	return nil
}

// ErrInvalidPolicy is matched (errors.Is) by every error about a policy.
var ErrInvalidPolicy = errors.New("invalid XDP policy")

// PolicyError says what is wrong with a policy, and where, in one line:
//
//	drop.json:3:12: unknown protocol "icpm" (did you mean "icmp"?); valid: tcp, udp, …
//	--allow-udp-ports: bad port "70000": want 1-65535 or a range such as 5000-5010
type PolicyError struct {
	Source       string // file name or flag ("--drop"); "" if none
	Line, Column int    // 1-based position in a file; 0 when not about a place
	Msg          string
}

func (e *PolicyError) Error() string {
	switch {
	case e.Source != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.Source, e.Line, e.Column, e.Msg)
	case e.Source != "":
		return e.Source + ": " + e.Msg
	}
	return e.Msg
}

// Is makes errors.Is(err, ErrInvalidPolicy) true.
func (e *PolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

// ---- the command-line forms ---------------------------------------------

// ParseDrop parses a comma-separated list of class names and shorthands
// ("icmp,icmpv6", "udp", "ipv6/frag", "malformed"); case does not matter.
func ParseDrop(s string) (ClassSet, error) {
	var set ClassSet
	for _, item := range splitList(s) {
		c, msg := dropName(item)
		if msg != "" {
			return 0, &PolicyError{Source: "--drop", Msg: msg}
		}
		set |= c
	}
	return set, nil
}

func dropName(name string) (ClassSet, string) {
	if c, ok := dropNames[strings.ToLower(name)]; ok {
		return c, ""
	}
	return 0, fmt.Sprintf("unknown protocol %q%s; valid: %s, or one class such as ipv4/udp or ipv6/frag",
		name, jsonpos.Suggest(name, dropNameList), strings.Join(dropNameList[:10], ", "))
}

// ParsePorts parses a comma-separated list of UDP ports and ranges
// ("53,123,5000-5010").
func ParsePorts(s string) ([]PortRange, error) {
	var rs []PortRange
	for _, item := range splitList(s) {
		r, msg := parsePortRange(item)
		if msg != "" {
			return nil, &PolicyError{Source: "--allow-udp-ports", Msg: msg}
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func parsePortRange(s string) (PortRange, string) {
	lo, hi, isRange := strings.Cut(s, "-")
	l, okL := parsePort(lo)
	h, okH := l, okL
	if isRange {
		h, okH = parsePort(hi)
	}
	switch {
	case !okL || !okH:
		return PortRange{}, fmt.Sprintf("bad port %q: want a port 1-65535 or a range such as 5000-5010", s)
	case h < l:
		return PortRange{}, fmt.Sprintf("bad port range %q: the first port is above the last", s)
	}
	return PortRange{l, h}, ""
}

func parsePort(s string) (uint16, bool) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	return uint16(n), err == nil && n > 0
}

// ParseEtherTypes parses a comma-separated list of EtherTypes: hex with
// 0x ("0x88cc"), decimal ("35020") or a well-known name ("lldp", "arp").
func ParseEtherTypes(s string) ([]uint16, error) {
	var ts []uint16
	for _, item := range splitList(s) {
		t, msg := parseEtherType(item)
		if msg != "" {
			return nil, &PolicyError{Source: "--drop-ethertype", Msg: msg}
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func parseEtherType(s string) (uint16, string) {
	var n uint64
	var err error
	if hex, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		n, err = strconv.ParseUint(hex, 16, 16)
	} else {
		n, err = strconv.ParseUint(s, 10, 16)
	}
	if err != nil {
		for t, name := range etherTypeNames {
			if strings.EqualFold(name, s) {
				return t, ""
			}
		}
		return 0, fmt.Sprintf("bad EtherType %q: want hex such as 0x88cc, a decimal number, or a name such as arp or lldp", s)
	}
	if n < 0x0600 {
		return 0, fmt.Sprintf("bad EtherType %q: values below 0x0600 are 802.3 frame lengths, not EtherTypes", s)
	}
	return uint16(n), ""
}

// splitList splits a comma-separated flag value, ignoring blanks around
// items; an empty string gives no items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// PolicyFromFlags builds the policy from the command line: either a policy
// file or the three list flags, not both.
func PolicyFromFlags(drop, allowUDPPorts, dropEtherTypes, file string) (Policy, error) {
	if file != "" {
		if drop != "" || allowUDPPorts != "" || dropEtherTypes != "" {
			return Policy{}, &PolicyError{Msg: "--policy and --drop/--allow-udp-ports/--drop-ethertype exclude each other; put every rule in the file"}
		}
		return LoadPolicy(file)
	}
	var p Policy
	var err error
	if p.Drop, err = ParseDrop(drop); err != nil {
		return Policy{}, err
	}
	if p.AllowUDPPorts, err = ParsePorts(allowUDPPorts); err != nil {
		return Policy{}, err
	}
	if p.DropEtherTypes, err = ParseEtherTypes(dropEtherTypes); err != nil {
		return Policy{}, err
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// ---- the policy file -----------------------------------------------------

// maxPolicySize bounds LoadPolicy: a policy is a few lines.
const maxPolicySize = 1 << 20

// LoadPolicy reads and parses a policy file; see ParsePolicy. Only a
// regular file of at most maxPolicySize bytes is read: a FIFO or a device
// is refused at once.
func LoadPolicy(path string) (Policy, error) {
	data, err := infile.Read("XDP policy", path, maxPolicySize)
	if err != nil {
		return Policy{}, err
	}
	return ParsePolicy(path, data)
}

// policyKeys are the policy file's fields, in the order errors list them.
var policyKeys = []string{"drop", "allow_udp_ports", "drop_ethertypes"}

// ParsePolicy parses a JSON policy such as
//
//	{
//	  "drop": ["icmp", "icmpv6"],
//	  "allow_udp_ports": [53, 123, "5000-5010"],
//	  "drop_ethertypes": ["0x88cc", "arp", 34958]
//	}
//
// Every field is optional. Errors are *PolicyError with the line and column
// of the offending text; unknown and repeated fields are errors. name
// (usually the file name) prefixes the messages.
func ParsePolicy(name string, data []byte) (Policy, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Policy{}, &PolicyError{Source: name, Msg: `empty policy; write a JSON object such as {"drop": ["icmp"]}`}
	}
	if off, msg, ok := jsonpos.CheckSyntax(data); !ok {
		return Policy{}, posError(name, data, off, msg)
	}
	pr := &policyReader{name: name, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	pr.dec.UseNumber()
	p, err := pr.read()
	if err != nil {
		return Policy{}, err
	}
	if err := p.Validate(); err != nil {
		err.(*PolicyError).Source = name
		return Policy{}, err
	}
	return p, nil
}

// policyReader walks the policy's JSON tokens, knowing where each starts.
type policyReader struct {
	name string
	data []byte
	dec  *json.Decoder
	pos  int // offset of the token last returned by next
}

// next returns the next token and records where it starts.
func (r *policyReader) next() (json.Token, error) {
	off := jsonpos.TokenStart(r.data, int(r.dec.InputOffset()))
	r.pos = off
	tok, err := r.dec.Token()
	if err != nil {
		// The syntax was checked already; this is a truncated or odd text.
		return nil, posError(r.name, r.data, off, "invalid JSON: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	return tok, nil
}

func (r *policyReader) errorf(format string, args ...any) error {
	return posError(r.name, r.data, r.pos, fmt.Sprintf(format, args...))
}

func (r *policyReader) read() (Policy, error) {
	var p Policy
	tok, err := r.next()
	if err != nil {
		return p, err
	}
	if tok != json.Delim('{') {
		return p, r.errorf(`the policy must be a JSON object such as {"drop": ["icmp"]}, not %s`, describe(tok))
	}
	seen := map[string]bool{}
	for r.dec.More() {
		tok, err := r.next()
		if err != nil {
			return p, err
		}
		key := tok.(string) // object keys are always strings
		if !slices.Contains(policyKeys, key) {
			return p, r.errorf("unknown field %q%s; valid fields: %s", key, jsonpos.Suggest(key, policyKeys), strings.Join(policyKeys, ", "))
		}
		if seen[key] {
			return p, r.errorf("field %q given twice", key)
		}
		seen[key] = true
		err = r.list(key, func(tok json.Token) string {
			switch key {
			case "drop":
				s, ok := tok.(string)
				if !ok {
					return fmt.Sprintf(`"drop" entries are protocol names such as "icmp", not %s`, describe(tok))
				}
				c, msg := dropName(s)
				p.Drop |= c
				return msg
			case "allow_udp_ports":
				var pr PortRange
				var msg string
				switch v := tok.(type) {
				case json.Number:
					pr, msg = parsePortRange(v.String())
				case string:
					pr, msg = parsePortRange(v)
				default:
					msg = fmt.Sprintf(`"allow_udp_ports" entries are ports such as 53 or ranges such as "5000-5010", not %s`, describe(tok))
				}
				p.AllowUDPPorts = append(p.AllowUDPPorts, pr)
				return msg
			default: // drop_ethertypes
				var t uint16
				var msg string
				switch v := tok.(type) {
				case json.Number:
					t, msg = parseEtherType(v.String())
				case string:
					t, msg = parseEtherType(v)
				default:
					msg = fmt.Sprintf(`"drop_ethertypes" entries are EtherTypes such as "0x88cc", "lldp" or 35020, not %s`, describe(tok))
				}
				p.DropEtherTypes = append(p.DropEtherTypes, t)
				return msg
			}
		})
		if err != nil {
			return p, err
		}
	}
	if _, err := r.next(); err != nil { // the closing brace
		return p, err
	}
	if _, err := r.dec.Token(); err != io.EOF {
		r.pos = int(r.dec.InputOffset())
		return p, r.errorf("unexpected text after the policy object")
	}
	return p, nil
}

// list reads a JSON array of scalars for field key, handing each to item,
// which returns an error message or "".
func (r *policyReader) list(key string, item func(json.Token) string) error {
	tok, err := r.next()
	if err != nil {
		return err
	}
	if tok != json.Delim('[') {
		return r.errorf("%q must be a list such as %s, not %s", key, listExample(key), describe(tok))
	}
	n := 0
	for r.dec.More() {
		tok, err := r.next()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && (d == '[' || d == '{') {
			return r.errorf("%q must be a flat list such as %s, not contain %s", key, listExample(key), describe(tok))
		}
		if msg := item(tok); msg != "" {
			return r.errorf("%s", msg)
		}
		n++
	}
	if _, err := r.next(); err != nil { // the closing bracket
		return err
	}
	if n == 0 {
		switch key {
		case "allow_udp_ports":
			return r.errorf(`"allow_udp_ports" is empty; leave it out to allow every port, or write "drop": ["udp"] to drop all UDP`)
		default:
			return r.errorf("%q is empty; leave it out", key)
		}
	}
	return nil
}

func listExample(key string) string {
	switch key {
	case "drop":
		return `["icmp", "icmpv6"]`
	case "allow_udp_ports":
		return `[53, 123, "5000-5010"]`
	}
	return `["0x88cc", "arp"]`
}

// describe names a JSON token's kind for error messages.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "a list"
	case string:
		return fmt.Sprintf("the string %q", v)
	case json.Number:
		return "the number " + v.String()
	case bool:
		return fmt.Sprintf("%v", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// posError is a PolicyError at byte offset off of data.
func posError(name string, data []byte, off int, msg string) *PolicyError {
	line, col := jsonpos.LineCol(data, off)
	return &PolicyError{Source: name, Line: line, Column: col, Msg: msg}
}
