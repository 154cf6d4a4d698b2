package netpolicy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestCheckAddr(t *testing.T) {
	refused := map[string]string{
		"127.0.0.1": "loopback", "127.255.255.254": "loopback", "0.0.0.0": "this network",
		"10.9.8.7": "private-use", "172.20.0.1": "private-use", "192.168.0.1": "private-use",
		"100.64.0.1": "shared address space", "169.254.169.254": "link-local", "198.18.5.5": "benchmarking",
		"192.0.2.1": "documentation", "198.51.100.1": "documentation", "203.0.113.1": "documentation",
		"192.0.0.8": "IETF protocol assignments", "224.0.0.251": "multicast", "239.1.1.1": "multicast",
		"240.0.0.1": "reserved", "255.255.255.255": "limited broadcast",
		"::1": "loopback", "::": "unspecified", "fc00::1": "unique-local", "fd00::2": "unique-local",
		"fe80::1": "link-local", "ff02::1": "multicast", "64:ff9b::8.8.8.8": "NAT64",
		"::ffff:127.0.0.1": "IPv4-mapped loopback", "::ffff:10.0.0.1": "IPv4-mapped private-use",
		"::127.0.0.1": "IPv4-compatible", "2002:7f00:1::": "6to4", "2001:0:4136:e378:8000:63bf:3fff:fdd2": "Teredo",
		"2001:db8::1": "documentation", "2a00:1450::5efe:127.0.0.1": "ISATAP address embedding 127.0.0.1",
		"2a00:1450::200:5efe:a9fe:a9fe": "ISATAP address embedding 169.254.169.254",
		"fec0::1":                       "site-local", "100::1": "discard-only",
	}
	var p Policy
	for s, why := range refused {
		err := p.CheckAddr(netip.MustParseAddr(s))
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: got %v, want refused", s, err)
			continue
		}
		if !strings.Contains(err.Error(), why) {
			t.Errorf("%s: got %q, want the reason %q", s, err, why)
		}
	}
	for _, s := range []string{"93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700::1111", "2a00:1450:4001::5efe:8.8.8.8", "::ffff:8.8.8.8"} {
		if err := p.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: got %v, want allowed", s, err)
		}
	}
	if err := p.CheckAddr(netip.MustParseAddr("fe80::1%eth0")); err == nil {
		t.Error("zoned address allowed")
	}
}

func TestAllow(t *testing.T) {
	p := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00:1::/32")}}
	for _, s := range []string{"10.1.2.3", "::ffff:10.1.2.3", "fd00:1::5"} {
		if err := p.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: got %v, want allowed by the operator", s, err)
		}
	}
	for _, s := range []string{"10.2.0.1", "127.0.0.1", "fd00:2::1", "169.254.169.254"} {
		if err := p.CheckAddr(netip.MustParseAddr(s)); err == nil {
			t.Errorf("%s: allowed, want still refused", s)
		}
	}
}

func TestCheckURL(t *testing.T) {
	var p Policy
	ok := map[string]string{
		"https://example.com/a?b": "example.com", "http://EXAMPLE.com.:8080/": "example.com.",
		"https://bücher.example/": "xn--bcher-kva.example", "http://93.184.216.34/": "93.184.216.34",
		"http://[2606:4700::1111]/": "2606:4700::1111", "http://1.example/": "1.example",
		"http://0x.example/": "0x.example",
	}
	for s, want := range ok {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.CheckURL(u)
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q allowed", s, got, err, want)
		}
	}
	for _, s := range []string{"http://example.123/", "http://a.0x1f/", "http://4294967295/", "http://99999999999999/", "http://x..y/", "http://./"} {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		if _, err := p.CheckURL(u); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: got %v, want refused", s, err)
		}
	}
}

type staticResolver map[string][]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return r[host], nil
}

func TestDialerRefusesBeforeConnecting(t *testing.T) {
	dialled := 0
	d := &Dialer{
		Resolver: staticResolver{"evil.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}},
		DialAddr: func(context.Context, string, netip.AddrPort) (net.Conn, error) {
			dialled++
			return nil, errors.New("dialled")
		},
	}
	for _, a := range []string{"evil.test:80", "127.0.0.1:80", "[::1]:443", "localhost:80", "2130706433:80"} {
		_, err := d.DialContext(context.Background(), "tcp", a)
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: got %v, want refused", a, err)
		}
	}
	if _, err := d.DialContext(context.Background(), "udp", "8.8.8.8:53"); !errors.Is(err, ErrRefused) {
		t.Errorf("udp: got %v, want refused", err)
	}
	if dialled != 0 {
		t.Errorf("dialled %d times, want never", dialled)
	}
	// The Control hook is the last line: a numeric dial to loopback fails in it.
	if err := (Policy{}).Control("tcp4", "127.0.0.1:80", nil); !errors.Is(err, ErrRefused) {
		t.Errorf("Control: got %v, want refused", err)
	}
	if err := (Policy{}).Control("tcp4", "93.184.216.34:80", nil); err != nil {
		t.Errorf("Control on a public address: %v", err)
	}
}
