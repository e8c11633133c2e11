//! cargo-fuzz target: `tandem::fuzzing::coll_rules`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem::fuzzing::coll_rules(data));
