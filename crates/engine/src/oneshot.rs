//! The one-shot runner behind the `run` tool. (Being written.)
