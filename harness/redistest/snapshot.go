package redistest

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Snapshot is what a key holds, to tell whether a script changed it: a
// hash's fields in order of name, a string's value. (DUMP is no such
// thing: Valkey serialises a hash in the order of its table, which a
// rehash changes without a write.)
func Snapshot(ctx context.Context, client redis.Cmdable, key string) string {
	switch client.Type(ctx, key).Val() {
	case "hash":
		h := client.HGetAll(ctx, key).Val()
		var b strings.Builder
		for _, f := range slices.Sorted(maps.Keys(h)) {
			b.WriteString(strconv.Quote(f) + "=" + strconv.Quote(h[f]) + "\n")
		}
		return "hash\n" + b.String()
	case "string":
		return "string\n" + client.Get(ctx, key).Val()
	case "none":
		return "none"
	}
	return "dump\n" + client.Dump(ctx, key).Val()
}
