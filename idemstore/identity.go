package idemstore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/onceflow/onceflow"
)

// Every Execute draws a nonce, and an owner when the request brings none:
// 32 and 64 hex characters of crypto/rand. identities draws them a batch
// at a time and cuts each from the batch's one string, so that an Execute
// costs neither a string of its own nor a call into the random source; a
// replay, which uses neither, pays little for them. Each batch is held by
// one Execute at a time (a sync.Pool), and every character of it is
// handed out once, so no two Executes share an owner or a nonce. An owner
// or nonce kept after its Execute keeps its batch's string alive: a
// batch is small (identityBatch).
type identities struct{ pool sync.Pool }

// identityBatch is how many random bytes a batch holds: eight owners and
// nonces (48 bytes each), 768 hex characters.
const identityBatch = 8 * (32 + 16)

// batch is the unused part of one batch's hex string.
type batch struct{ hex string }

// take cuts n hex characters from a batch, drawing a new one when the
// pooled one has too few left.
func (ids *identities) take(n int) string {
	b, _ := ids.pool.Get().(*batch)
	if b == nil {
		b = new(batch)
	}
	if len(b.hex) < n {
		var raw [identityBatch]byte
		if _, err := rand.Read(raw[:]); err != nil {
			// crypto/rand.Read never returns an error on supported
			// platforms (Go 1.24+ crashes the program instead).
			panic(fmt.Sprintf("idemstore: crypto/rand: %v", err))
		}
		var h [2 * identityBatch]byte
		hex.Encode(h[:], raw[:])
		b.hex = string(h[:])
	}
	s := b.hex[:n]
	b.hex = b.hex[n:]
	ids.pool.Put(b)
	return s
}

// ownerAndNonce returns a random owner and a random nonce.
func (ids *identities) ownerAndNonce() (onceflow.Owner, onceflow.Nonce) {
	s := ids.take(96)
	return onceflow.Owner(s[:64]), onceflow.Nonce(s[64:])
}

// nonce returns a random nonce.
func (ids *identities) nonce() onceflow.Nonce { return onceflow.Nonce(ids.take(32)) }
