//! The orphan guard: a separate process that outlives the server and cleans
//! up after it if it dies. (Being written.)
