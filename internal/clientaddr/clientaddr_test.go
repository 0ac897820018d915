package clientaddr

import (
	"net"
	"testing"
)

func TestOfCountsAnIPv6HostByItsSlash64(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"192.0.2.7:5555", "192.0.2.7"},
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2:bbbb::9]:80", "2001:db8:1:2::"},
		{"[::ffff:192.0.2.7]:1", "192.0.2.7"},
		{"@", "@"},
	} {
		if got := Of(c.in); got != c.want {
			t.Errorf("Of(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := OfIP(net.ParseIP("2001:db8:1:2::5")); got != "2001:db8:1:2::" {
		t.Errorf("OfIP = %q", got)
	}
}
