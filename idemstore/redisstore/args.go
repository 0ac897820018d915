package redisstore

import "sync/atomic"

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
