//! cargo-fuzz target: `tandem::fuzzing::hello`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem::fuzzing::hello(data));
