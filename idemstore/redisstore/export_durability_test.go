package redisstore

// WaitAOFSupported exports waitAOFSupported to the tests.
var WaitAOFSupported = waitAOFSupported

// DurableKey exports Store.durableKey to the tests.
func DurableKey(s *Store, key string) string { return s.durableKey(key) }
