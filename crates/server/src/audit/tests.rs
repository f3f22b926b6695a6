//! Unit tests of line building, rotation, reading back and times.

use super::*;
