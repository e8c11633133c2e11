//! cargo-fuzz target: `tandem::fuzzing::pmi2_answer`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem::fuzzing::pmi2_answer(data));
