//! dash.js 4.7.4's `SwitchRequestHistory` and `SwitchHistoryRule`: the last
//! 8 quality decisions, each counted at the quality it was made from as a
//! drop (to a lower quality) or not; the rule walks the qualities upwards
//! summing both counts and, once 6 decisions are counted and drops / no
//! drops exceeds 0.075, caps the choice there (one below when that quality
//! itself saw a drop). In practice: a drop from quality q within the last
//! 8 decisions keeps the player below q until it leaves the window.

use std::collections::VecDeque;

/// Decisions remembered (`SWITCH_REQUEST_HISTORY_DEPTH`).
pub const HISTORY_DEPTH: usize = 8;
/// Decisions counted before the rule applies (`SAMPLE_SIZE`).
pub const SAMPLE_SIZE: u32 = 6;
/// Drops per non-drop that trigger the cap (`MAX_SWITCH`).
pub const MAX_SWITCH: f64 = 0.075;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    drops: u32,
    no_drops: u32,
}

/// The decision history and its rule.
#[derive(Debug, Clone, Default)]
pub struct SwitchHistory {
    totals: Vec<Option<Counts>>,
    history: VecDeque<(usize, bool)>,
}

impl SwitchHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a decision from `old` to `new` (equal: no change).
    pub fn push(&mut self, old: usize, new: usize) {
        if self.totals.len() <= old {
            self.totals.resize(old + 1, None);
        }
        let drop = new < old;
        let c = self.totals[old].get_or_insert_with(Counts::default);
        if drop {
            c.drops += 1;
        } else {
            c.no_drops += 1;
        }
        self.history.push_back((old, drop));
        if self.history.len() > HISTORY_DEPTH {
            if let Some((i, d)) = self.history.pop_front() {
                if let Some(c) = self.totals[i].as_mut() {
                    if d {
                        c.drops -= 1;
                    } else {
                        c.no_drops -= 1;
                    }
                }
            }
        }
    }

    /// Forgets everything (dash.js resets it on an abandonment).
    pub fn reset(&mut self) {
        self.totals.clear();
        self.history.clear();
    }

    /// The rule's cap, `None` when it does not apply.
    pub fn max_index(&self) -> Option<usize> {
        let (mut drops, mut no_drops) = (0u32, 0u32);
        for (i, c) in self.totals.iter().enumerate() {
            let Some(c) = c else { continue };
            drops += c.drops;
            no_drops += c.no_drops;
            // 0/0 is NaN and x/0 infinite, as in JavaScript
            if drops + no_drops >= SAMPLE_SIZE && drops as f64 / no_drops as f64 > MAX_SWITCH {
                return Some(if i > 0 && c.drops > 0 { i - 1 } else { i });
            }
        }
        None
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.totals.capacity() * std::mem::size_of::<Option<Counts>>()
            + self.history.capacity() * std::mem::size_of::<(usize, bool)>()
    }
}
