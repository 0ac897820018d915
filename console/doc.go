// Package console is onceflow's operator console, an http.Handler a
// service mounts on its own mux: a page (html/template, no front-end
// build) that lists the workflows waiting on a decision, with forms to
// decide each incident (completed with a result, retry, fail with a
// reason), the recent workflows of the task queue, and each workflow's
// trail: its timeline from the workflow's own history (time, step, state,
// attempt, actor), its input, the incidents with their checkpoints and
// evidence, the decisions with their audit, and the raw trail collapsed.
//
// What the console knows beyond the history comes from the service:
// Config.Evidence, an operator.EvidenceSource, says what the downstream
// holds for each pending step (shown beside its forms, pre-filling the
// decision it implies, and sent with the decision); when it also
// implements FactSource, the workflow's page shows what the service holds
// about the business object the workflow acts on (the order example's
// ledger rows) and the index a one-line summary of it.
//
// A decision goes to the workflow as the onceflow.decide Update (the
// onceflow.resolve signal where the server takes no Updates), exactly as
// `worker resolve` sends it (operator.Resolve), and the page shows the
// workflow's answer. The console asks for a token (Config.Token, 32
// bytes' worth at least: CheckToken) unless Config.Dev: open
// /console?token=… once, and an HttpOnly, SameSite=Strict cookie keeps
// it. Wrong tokens are limited per client address (10 at once, then one
// every 6s; beyond, 429 with Retry-After). Form posts are refused cross-origin
// (http.CrossOriginProtection). Under Dev it answers only requests for a
// loopback host name (localhost, 127.0.0.1, [::1]): a page whose own name
// was rebound to 127.0.0.1 (DNS rebinding) is same-origin to the browser,
// so the Host header is what tells it apart. Every answer carries a
// Content-Security-Policy that allows no script, and the page shows only
// messages of its own (a fixed set of codes in ?msg=), never text from
// the address.
package console
