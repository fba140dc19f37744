//! S3 tests (filled below).
