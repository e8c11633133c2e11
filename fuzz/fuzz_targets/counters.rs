//! cargo-fuzz target: `tandem::fuzzing::counters`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem::fuzzing::counters(data));
