//! Integration tests of magma-protocol: one test binary, one module per theme.

mod corpus;
mod public_corpus;
