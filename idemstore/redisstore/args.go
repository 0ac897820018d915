package redisstore

import (
	"sync/atomic"
	"unsafe"
)

// argCache keeps the interface values of script arguments that repeat from
// call to call (the codec, the lease and TTLs in milliseconds, target
// states), so that handing them to go-redis, which takes ...any, does not
// allocate each time. A miss costs one allocation, as without the cache.
type argCache struct {
	ints [16]atomic.Pointer[boxedInt]
	strs [16]atomic.Pointer[boxedString]
}

type boxedInt struct {
	v int64
	a any
}

type boxedString struct {
	v string
	a any
}

// int returns v as an interface value.
func (c *argCache) int(v int64) any {
	slot := &c.ints[(uint64(v)*0x9e3779b97f4a7c15)>>60]
	if b := slot.Load(); b != nil && b.v == v {
		return b.a
	}
	b := &boxedInt{v: v, a: v}
	slot.Store(b)
	return b.a
}

// str returns v as an interface value.
func (c *argCache) str(v string) any {
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	slot := &c.strs[h>>60]
	if b := slot.Load(); b != nil && b.v == v {
		return b.a
	}
	b := &boxedString{v: v, a: v}
	slot.Store(b)
	return b.a
}

// text is a script argument that go-redis writes from a string the call
// holds (scriptCall.text): a pointer, it goes into the command's ...any
// without the allocation a string's header would cost. go-redis writes it
// by MarshalBinary, which hands over the string's bytes without a copy
// (go-redis only copies them into its buffer); fmt, which go-redis' key
// routing and redisotel's db.statement use for a type they do not know,
// prints it by String. Keys are never texts: go-redis' client-side cache
// caches only keys it knows the type of.
type text struct{ p *string }

// MarshalBinary implements encoding.BinaryMarshaler.
func (t text) MarshalBinary() ([]byte, error) {
	return unsafe.Slice(unsafe.StringData(*t.p), len(*t.p)), nil
}

// String implements fmt.Stringer.
func (t text) String() string { return *t.p }

// blob is text for bytes (a response).
type blob struct{ p *[]byte }

// MarshalBinary implements encoding.BinaryMarshaler.
func (b blob) MarshalBinary() ([]byte, error) { return *b.p, nil }

// String implements fmt.Stringer.
func (b blob) String() string { return string(*b.p) }

// appendRaw appends to dst the bytes the lowercase hex h encodes: the form
// the record keeps an owner, a fingerprint and a nonce in (schema.RawLen).
// h is valid hex: a request is validated before anything is sent.
func appendRaw(dst []byte, h string) []byte {
	for i := 0; i+1 < len(h); i += 2 {
		dst = append(dst, unhex(h[i])<<4|unhex(h[i+1]))
	}
	return dst
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}
