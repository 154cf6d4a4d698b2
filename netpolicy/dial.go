package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Resolver looks names up; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects only to addresses the policy allows. It resolves the name
// itself, drops refused addresses, and dials the rest by number; the dial's
// Control hook checks the numeric address once more, so nothing else can
// resolve it differently in between.
type Dialer struct {
	Policy Policy
	// Resolver defaults to net.DefaultResolver.
	Resolver Resolver
	// DialAddr connects to an address the policy allowed; nil means a
	// net.Dialer whose Control is Policy.Control. Tests replace it to reach
	// a local server standing in for a public address.
	DialAddr func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error)
	// Timeout bounds one connection attempt; 0 means 10s.
	Timeout time.Duration
	// Exempt is a host:port reached without the policy (an explicitly
	// configured proxy); "" means none.
	Exempt string
}

// DialContext implements the shape http.Transport.DialContext wants.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &RefusedError{Target: address, Reason: "network " + network + " is not allowed"}
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	port, ok := parseDecimal(portStr)
	if !ok || port == 0 || port > 65535 {
		return nil, &RefusedError{Target: address, Reason: "invalid port"}
	}
	if d.Exempt != "" && address == d.Exempt {
		var nd net.Dialer
		nd.Timeout = d.timeout()
		return nd.DialContext(ctx, network, address)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		name, err := d.Policy.CheckHost(host)
		if err != nil {
			return nil, err
		}
		r := d.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		ipnet := "ip"
		switch network {
		case "tcp4":
			ipnet = "ip4"
		case "tcp6":
			ipnet = "ip6"
		}
		addrs, err = r.LookupNetIP(ctx, ipnet, name)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
	}
	var refused, failed error
	for _, a := range addrs {
		if err := d.Policy.CheckAddr(a); err != nil {
			if refused == nil {
				refused = err
			}
			continue
		}
		c, err := d.dial(ctx, netip.AddrPortFrom(a, uint16(port)))
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrRefused) && refused == nil {
			refused = err
		}
		failed = err
		if ctx.Err() != nil {
			break
		}
	}
	if failed != nil {
		return nil, failed
	}
	if host != "" && refused != nil {
		var re *RefusedError
		if errors.As(refused, &re) && re.Target != host {
			return nil, &RefusedError{Target: host + " (" + re.Target + ")", Reason: re.Reason}
		}
	}
	return nil, refused
}

func (d *Dialer) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return 10 * time.Second
}

func (d *Dialer) dial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	network := "tcp4"
	if !ap.Addr().Is4() {
		network = "tcp6"
	}
	if d.DialAddr != nil {
		return d.DialAddr(ctx, network, ap)
	}
	nd := net.Dialer{Timeout: d.timeout(), Control: d.Policy.Control}
	return nd.DialContext(ctx, network, ap.String())
}
