//! Where a writer's log stands, as its tip commit's trailers say: what
//! the store remembers of each tip it wrote or read (see [`super::log`]).

/// Position of a writer's tip: last seq and clock, from its trailers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TipPosition {
    pub seq: u64,
    pub clock: u64,
}
