//! The soak's traffic plan: the kinds of call, their mix, their sizes, and
//! the hostile text; all drawn from a seeded generator, so a seed names the
//! same sequence of calls for every caller on every run (the interleaving
//! of callers is the scheduler's).

use std::time::Duration;

/// A small, fast, seedable generator (SplitMix64): the plan must be the
/// same for a seed everywhere, which a stated algorithm guarantees.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The generator of caller `index` under the run's `seed`.
    pub fn for_caller(seed: u64, index: usize) -> Rng {
        let mut rng = Rng(seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }

    /// A number in `low..=high`, log-uniform (as many small sizes as large).
    pub fn log_range(&mut self, low: u64, high: u64) -> u64 {
        let (l, h) = ((low.max(1) as f64).ln(), (high as f64).ln());
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((l + (h - l) * unit).exp().round() as u64).clamp(low, high)
    }
}

/// One kind of call a caller makes. Each has one expected outcome, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `echo` of 1 B to 64 KiB of hostile text: the text must come back.
    Echo,
    /// `ping`: the empty result.
    Ping,
    /// `big` of 256 KiB to 4 MiB: the length must match.
    Big,
    /// `slow` given up after 20 to 200 ms: it must time out, cancellation sent.
    GiveUp,
    /// `slow` of 1 to 20 ms: `slept`.
    Short,
    /// `fail`: a tool failure (`isError: true`).
    Fail,
    /// `bad_args`: the JSON-RPC error -32602.
    Invalid,
    /// `panic`: the handler panics; a tool failure (`isError: true`).
    Panic,
    /// `slow` dropped 0 to 10 ms after it was sent, before its answer.
    Drop,
    /// Hostile: a 4 MiB `big` whose result is not read for 1 to 4 s, then
    /// read and checked (it is still owed).
    Stalled,
    /// Hostile: 16 `slow` calls sent and dropped at once (a reset storm).
    Storm,
    /// Hostile: a request over the server's transport limit.
    Oversize,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 12] = [
        Kind::Echo,
        Kind::Ping,
        Kind::Big,
        Kind::GiveUp,
        Kind::Short,
        Kind::Fail,
        Kind::Invalid,
        Kind::Panic,
        Kind::Drop,
        Kind::Stalled,
        Kind::Storm,
        Kind::Oversize,
    ];

    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Echo => "echo",
            Kind::Ping => "ping",
            Kind::Big => "big",
            Kind::GiveUp => "give_up",
            Kind::Short => "short_slow",
            Kind::Fail => "is_error",
            Kind::Invalid => "invalid_params",
            Kind::Panic => "panic",
            Kind::Drop => "dropped",
            Kind::Stalled => "stalled_reader",
            Kind::Storm => "reset_storm",
            Kind::Oversize => "oversize",
        }
    }

    /// Its index in [`Kind::ALL`].
    pub fn index(self) -> usize {
        Kind::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// The mix of an ordinary caller, in percent: half the calls are `echo`.
pub const MIX: [(Kind, u64); 9] = [
    (Kind::Echo, 50),
    (Kind::Ping, 12),
    (Kind::Big, 3),
    (Kind::GiveUp, 5),
    (Kind::Short, 9),
    (Kind::Fail, 6),
    (Kind::Invalid, 6),
    (Kind::Panic, 3),
    (Kind::Drop, 6),
];

/// Smallest and largest `echo` text, in bytes.
pub const ECHO_BYTES: (u64, u64) = (1, 64 << 10);
/// Smallest and largest `big` result, in bytes.
pub const BIG_BYTES: (u64, u64) = (256 << 10, 4 << 20);
/// How long a give-up call waits before giving up, in ms.
pub const GIVE_UP_MS: (u64, u64) = (20, 200);
/// How long a short slow call sleeps, in ms.
pub const SHORT_MS: (u64, u64) = (1, 20);
/// How long after its send a dropped call is dropped, in ms.
pub const DROP_MS: (u64, u64) = (0, 10);
/// How long a `slow` call that is given up or dropped would sleep, in ms
/// (far longer than any wait for it, so its answer never comes first).
pub const SLOW_NEVER_MS: u64 = 30_000;

/// One planned call.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    /// `echo` of this text.
    Echo(String),
    /// `ping`.
    Ping,
    /// `big` of this many bytes.
    Big(u64),
    /// `slow` given up after this long.
    GiveUp(Duration),
    /// `slow` of this many ms.
    Short(u64),
    /// `fail`.
    Fail,
    /// `bad_args`.
    Invalid,
    /// `panic`.
    Panic,
    /// `slow` dropped after this long.
    Drop(Duration),
}

impl Planned {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Planned::Echo(_) => Kind::Echo,
            Planned::Ping => Kind::Ping,
            Planned::Big(_) => Kind::Big,
            Planned::GiveUp(_) => Kind::GiveUp,
            Planned::Short(_) => Kind::Short,
            Planned::Fail => Kind::Fail,
            Planned::Invalid => Kind::Invalid,
            Planned::Panic => Kind::Panic,
            Planned::Drop(_) => Kind::Drop,
        }
    }
}

/// Call number `n` (from 0) of ordinary caller `caller`. The first
/// `MIX.len()` calls go once through every kind of the mix, starting at the
/// caller's index, so that a soak of seconds on a loaded machine still makes
/// every kind of call and callers start on different kinds; after them, the
/// mix's weights choose.
pub fn next_call(rng: &mut Rng, caller: usize, n: u64) -> Planned {
    let kind = match usize::try_from(n) {
        Ok(n) if n < MIX.len() => MIX[(caller % MIX.len() + n) % MIX.len()].0,
        _ => weighted(rng),
    };
    match kind {
        Kind::Echo => {
            let bytes = rng.log_range(ECHO_BYTES.0, ECHO_BYTES.1) as usize;
            Planned::Echo(hostile_text(rng, bytes))
        }
        Kind::Ping => Planned::Ping,
        Kind::Big => Planned::Big(rng.log_range(BIG_BYTES.0, BIG_BYTES.1)),
        Kind::GiveUp => Planned::GiveUp(Duration::from_millis(rng.range(GIVE_UP_MS.0, GIVE_UP_MS.1))),
        Kind::Short => Planned::Short(rng.range(SHORT_MS.0, SHORT_MS.1)),
        Kind::Fail => Planned::Fail,
        Kind::Invalid => Planned::Invalid,
        Kind::Panic => Planned::Panic,
        _ => Planned::Drop(Duration::from_millis(rng.range(DROP_MS.0, DROP_MS.1))),
    }
}

/// A kind drawn by the mix's weights.
fn weighted(rng: &mut Rng) -> Kind {
    let total: u64 = MIX.iter().map(|(_, w)| w).sum();
    let mut pick = rng.range(0, total - 1);
    for (kind, weight) in MIX {
        if pick < weight {
            return kind;
        }
        pick -= weight;
    }
    Kind::Echo
}

/// Text of at most `bytes` bytes (and at least `bytes - 3`) full of what
/// escaping gets wrong: quotes, backslashes, control characters (NUL, LF,
/// CR, TAB, ESC...), U+2028, and 2-, 3- and 4-byte characters.
pub fn hostile_text(rng: &mut Rng, bytes: usize) -> String {
    const PIECES: [&str; 16] =
        ["\"", "\\", "\u{0}", "\n", "\r", "\t", "\u{1b}", "\u{7f}", "é", "€", "𝄞", "🙂", "日本", "\u{2028}", "a", "</"];
    let mut text = String::with_capacity(bytes);
    while text.len() < bytes {
        let piece = PIECES[(rng.next_u64() % PIECES.len() as u64) as usize];
        if text.len() + piece.len() > bytes {
            if text.len() + 1 > bytes {
                break;
            }
            text.push('x');
            continue;
        }
        text.push_str(piece);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_one_plan_and_the_mix_has_every_kind() {
        let plan = |seed| {
            let mut rng = Rng::for_caller(seed, 3);
            (0..2000).map(|n| next_call(&mut rng, 3, n)).collect::<Vec<_>>()
        };
        // The first calls go through every kind once, from the caller's own.
        let first: Vec<Kind> = plan(7).iter().take(MIX.len()).map(Planned::kind).collect();
        assert_eq!(first[0], MIX[3].0);
        for (kind, _) in MIX {
            assert!(first.contains(&kind), "{kind:?} not among the first calls: {first:?}");
        }
        assert_eq!(plan(7), plan(7));
        assert_ne!(plan(7), plan(8));
        let calls = plan(7);
        for (kind, _) in MIX {
            assert!(calls.iter().any(|c| c.kind() == kind), "{kind:?} never planned");
        }
        let echoes = calls.iter().filter(|c| c.kind() == Kind::Echo).count();
        assert!((800..1200).contains(&echoes), "{echoes} echoes of 2000");
    }

    #[test]
    fn hostile_text_fits_its_size_and_holds_what_escaping_gets_wrong() {
        let mut rng = Rng::new(1);
        for bytes in [1, 2, 3, 4, 5, 100, 65_536] {
            let text = hostile_text(&mut rng, bytes);
            assert!(text.len() <= bytes && text.len() + 3 >= bytes, "{bytes}: {}", text.len());
        }
        let text = hostile_text(&mut rng, 4096);
        for needle in ["\"", "\\", "\u{0}", "\n", "𝄞"] {
            assert!(text.contains(needle), "{needle:?} missing");
        }
        let mut rng = Rng::new(2);
        let sizes: Vec<u64> = (0..1000).map(|_| rng.log_range(BIG_BYTES.0, BIG_BYTES.1)).collect();
        assert!(sizes.iter().all(|s| (BIG_BYTES.0..=BIG_BYTES.1).contains(s)));
        assert!(sizes.iter().any(|s| *s < 512 << 10) && sizes.iter().any(|s| *s > 3 << 20));
    }
}
