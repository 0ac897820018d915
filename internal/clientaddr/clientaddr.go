// Package clientaddr names the client a per-client limit counts a
// connection or request by, so the worker's connection and request caps
// and the console's failed-token limit count the same client.
package clientaddr

import "net"

// Of is the client of a request's RemoteAddr ("host:port"): the IP of an
// IPv4 client, the /64 of an IPv6 one (a single host commonly has a whole
// /64), and the address as given when it holds no IP. Behind a proxy it
// is the proxy's.
func Of(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	return OfIP(ip)
}

// OfIP is the client of an IP, as Of.
func OfIP(ip net.IP) string {
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String()
}
