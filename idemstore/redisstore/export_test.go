package redisstore

// SetField writes one field of a stored record as the schema names it
// (see setField), for the tests of package redisstore_test.
var SetField = setField

// PipelinedReads counts the replay reads s sent through the
// auto-pipeliner (unless Config.NoAutoPipeline).
func PipelinedReads(s *Store) int64 { return s.pipelined.Load() }

// Raw is the form the record keeps a hex owner, fingerprint or nonce in:
// the bytes it encodes.
func Raw(h string) string { return string(appendRaw(nil, h)) }

// KeyDigest is the scope digest as a record key holds it (appendDigest).
func KeyDigest(h string) string { return string(appendDigest(nil, h)) }
