// Package webhook authenticates webhook deliveries the way large payment
// providers sign theirs: each delivery carries an HMAC-SHA256, under a
// secret the sender and the receiver share, of its timestamp and its raw
// body, in a header:
//
//	Webhook-Signature: t=1733200000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd
//
// where v1 is the hex HMAC-SHA256 of "<t>.<raw body>" (the timestamp's
// decimal digits, a dot, the body's bytes as sent). A sender that rotates
// its secret may send one v1 per secret it signs with.
//
// A Verifier checks a delivery against every secret of every sender it
// knows (Config.Secrets: several per sender at once, so a secret can be
// rotated without a window of refused deliveries), in constant time
// (hmac.Equal), and refuses a timestamp further than Config.Tolerance (5
// minutes by default) from its clock, so a captured delivery cannot be
// replayed later. Verifier.Handler reads the body (at most
// Config.MaxBytes, else 413), verifies it, names the sender in the
// request's context with idemhttp.WithPrincipal and hands the body on
// unchanged; an idempotency middleware behind it (idemhttp.Config with
// Principal: idemhttp.ContextPrincipal) then scopes event IDs per sender,
// so no one can squat an event ID before the real sender delivers it.
//
// A delivery without a signature is answered 401, unless
// Config.UnsignedSender names who such deliveries come from (a sender
// that cannot sign, on a network only it reaches): an explicit choice,
// never a default. A delivery with a signature that does not verify is
// always 401.
//
// Senders sign with Sign.
package webhook
