//! The search for `\n`: memchr's AVX2 searcher called directly where the CPU
//! has AVX2, `memchr::memchr` elsewhere.
//!
//! `memchr::memchr` picks its implementation through a function pointer on
//! every call. With 200-byte frames that dispatch is a call per frame, about
//! a tenth of the framer's time; the searcher chosen once when the framer is
//! built skips it. The result is the same either way: the index of the first
//! `\n`.

/// Finds the first `\n` in a byte slice.
#[derive(Clone, Debug)]
pub(crate) struct Newline {
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::memchr::One>,
    /// Bytes searched so far: up to and including the `\n` found, or all of
    /// a slice without one (unit tests check the no-rescan guarantee).
    #[cfg(test)]
    scanned: core::cell::Cell<u64>,
}

impl Newline {
    /// Picks the searcher for this CPU (with `std`, detected at run time;
    /// without it, from the compile-time target features).
    pub(crate) fn new() -> Newline {
        Newline {
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::x86_64::avx2::memchr::One::new(b'\n'),
            #[cfg(test)]
            scanned: core::cell::Cell::new(0),
        }
    }

    /// Bytes searched so far.
    #[cfg(test)]
    pub(crate) fn scanned(&self) -> u64 {
        self.scanned.get()
    }

    /// The index of the first `\n` in `haystack`.
    #[inline(always)]
    pub(crate) fn find(&self, haystack: &[u8]) -> Option<usize> {
        let found = self.search(haystack);
        #[cfg(test)]
        self.scanned.set(self.scanned.get() + found.map_or(haystack.len(), |i| i + 1) as u64);
        found
    }

    #[inline(always)]
    fn search(&self, haystack: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = self.avx2 {
            return avx2.find(haystack);
        }
        memchr::memchr(b'\n', haystack)
    }
}

#[cfg(test)]
mod tests {
    use super::Newline;

    #[test]
    fn finds_the_first_newline_at_every_position_and_length() {
        let newline = Newline::new();
        for len in 0..300 {
            let mut bytes = alloc::vec![b'x'; len];
            assert_eq!(newline.find(&bytes), None);
            for at in (0..len).rev() {
                bytes[at] = b'\n';
                assert_eq!(newline.find(&bytes), Some(at), "len {len}, first at {at}");
            }
        }
    }
}
