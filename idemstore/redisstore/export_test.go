package redisstore

// SetField writes one field of a stored record as the schema names it
// (see setField), for the tests of package redisstore_test.
var SetField = setField
