package redisstore

// SetField writes one field of a stored record as the schema names it
// (see setField), for the tests of package redisstore_test.
var SetField = setField

// PipelinedReads counts the replay reads s sent through the
// auto-pipeliner (Config.AutoPipelineReads).
func PipelinedReads(s *Store) int64 { return s.pipelined.Load() }
