package redisstore

// WaitAOFSupported exports waitAOFSupported to the tests.
var WaitAOFSupported = waitAOFSupported
