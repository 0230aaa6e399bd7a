package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"voucherd/internal/voucher"
)

// Guard decides where deliveries may go: http and https only and, unless
// AllowPrivate, no loopback, private, link-local or otherwise internal
// address, checked when an endpoint is registered and again at every
// delivery on the address actually dialled (a name that resolved to a
// public address at registration and to an internal one later, DNS
// rebinding, is refused then).
type Guard struct {
	// AllowPrivate lets endpoints on internal addresses through (outside
	// production, or WEBHOOK_ALLOW_PRIVATE=true).
	AllowPrivate bool
	// Lookup resolves a host name; nil: net.DefaultResolver. Tests give
	// their own to play a rebinding name server.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// errRefusedAddress: a delivery's address is internal.
var errRefusedAddress = errors.New("webhook: the address is loopback, private or link-local")

// CheckURL judges a URL at registration: INVALID_INPUT (field url) when it
// is not http(s) or, unless AllowPrivate, names or resolves to an internal
// address. A name that does not resolve is refused too in that case.
func (g Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return voucher.Invalid("url", "url must be an http:// or https:// URL without user information")
	}
	if g.AllowPrivate {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := g.resolve(ctx, u.Hostname())
	if err != nil {
		return voucher.Invalid("url", "url's host does not resolve")
	}
	for _, a := range addrs {
		if Internal(a) {
			return voucher.Invalid("url", "url is on a loopback, private or link-local address (WEBHOOK_ALLOW_PRIVATE=true allows it)")
		}
	}
	return nil
}

func (g Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	if g.Lookup != nil {
		return g.Lookup(ctx, host)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, err
}

// Internal reports an address a delivery may not reach unless private
// addresses are allowed: loopback, private (RFC 1918, fc00::/7),
// link-local, unspecified, multicast, CGNAT (100.64.0.0/10) and the
// IPv4-mapped or 6to4 forms of those.
func Internal(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range internalPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var internalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("2002::/16"),
}

// dialContext resolves the host itself and dials only an address it
// checked: resolve-then-dial, so the name server cannot answer the check
// one address and the dial another. The dialer's Control checks the
// address once more at the socket.
func (g Guard) dialContext(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, Control: g.control}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		addrs, err := g.resolve(ctx, host)
		if err != nil {
			return nil, err
		}
		var firstErr error
		for _, a := range addrs {
			if !g.AllowPrivate && Internal(a) {
				firstErr = cmpErr(firstErr, fmt.Errorf("%w: %s", errRefusedAddress, host))
				continue
			}
			c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return c, nil
			}
			firstErr = cmpErr(firstErr, err)
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("webhook: %s has no address", host)
		}
		return nil, firstErr
	}
}

func cmpErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

func (g Guard) control(_, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil || Internal(ap.Addr()) {
		return errRefusedAddress
	}
	return nil
}
