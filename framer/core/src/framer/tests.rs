//! The framer's guarantees, one test each, in both input modes.

use alloc::vec;
use alloc::vec::Vec;

use crate::check::{self, MODES, Mode, check_against_reference, check_every_split, normalize, run};
use crate::{Bom, Config, EmptyLines, Event, FrameError, Framer, OversizePolicy};

fn cfg(max_frame: usize, oversize: OversizePolicy) -> Config {
    Config::DEFAULT.with_max_frame(max_frame).with_oversize(oversize)
}

fn frame(bytes: &[u8]) -> Event<Vec<u8>> {
    Event::Frame(bytes.to_vec())
}

/// A small xorshift generator: deterministic pseudo-random chunkings and
/// inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Reads `piece` into the framer in read-into mode, as many reads as its
/// spare space takes, draining the events after each into `on_event`.
fn read_into(framer: &mut Framer, mut piece: &[u8], mut on_event: impl FnMut(&Framer, Event<Vec<u8>>)) {
    while !piece.is_empty() {
        let spare = framer.spare();
        let n = spare.len().min(piece.len());
        spare[..n].copy_from_slice(&piece[..n]);
        framer.commit(n);
        piece = &piece[n..];
        while let Some(event) = framer.next_event().unwrap() {
            let event = event.map(<[u8]>::to_vec);
            on_event(framer, event);
        }
    }
}

#[test]
fn frame_of_exactly_max_frame_is_delivered_and_one_more_is_oversize() {
    for policy in [OversizePolicy::Skip, OversizePolicy::Fail] {
        let config = cfg(8, policy);
        for delim in [&b"\n"[..], b"\r\n"] {
            let at_limit = [&b"12345678"[..], delim].concat();
            let out = check_against_reference(&config, &at_limit, &[]);
            assert_eq!(out.events, vec![frame(b"12345678")], "{policy:?} {delim:?}");

            let over = [&b"123456789"[..], delim].concat();
            let out = normalize(&config, run(&config, &over, &[], Mode::Push));
            match policy {
                OversizePolicy::Skip => assert_eq!(
                    out.events,
                    vec![Event::OversizeStarted { seen: 0 }, Event::OversizeSkipped { len: 9 }],
                    "{delim:?}"
                ),
                OversizePolicy::Fail => {
                    assert!(out.events.is_empty());
                    assert_eq!(out.error, Some(FrameError::Oversize { seen: 0, max_frame: 8 }));
                }
            }
            check_every_split(&config, &over);
        }
    }
}

#[test]
fn carriage_return_counts_toward_the_limit_when_not_stripped() {
    let config = cfg(8, OversizePolicy::Skip).with_strip_cr(false);
    let out = check_against_reference(&config, b"1234567\r\n12345678\r\n", &[3]);
    assert_eq!(
        out.events,
        vec![frame(b"1234567\r"), Event::OversizeStarted { seen: 0 }, Event::OversizeSkipped { len: 9 }]
    );
}

#[test]
fn a_bare_cr_is_never_a_delimiter() {
    let config = cfg(64, OversizePolicy::Skip);
    let out = check_against_reference(&config, b"a\rb\r\r\n\rc\n", &[1]);
    assert_eq!(out.events, vec![frame(b"a\rb\r"), frame(b"\rc")]);
    assert_eq!(out.stats.cr_stripped, 1);
}

#[test]
fn frames_around_an_oversize_frame_survive_in_one_chunk_and_split() {
    let config = cfg(16, OversizePolicy::Skip);
    let input = b"{\"id\":1}\n{\"id\":2,\"pad\":\"xxxxxxxxxxxxxxxx\"}\r\n{\"id\":3}\n";
    for mode in MODES {
        let out = run(&config, input, &[], mode);
        assert_eq!(out.events[0], frame(b"{\"id\":1}"), "{mode:?}");
        assert_eq!(out.events[1], Event::OversizeStarted { seen: 34 }, "{mode:?}");
        assert_eq!(out.events[2], Event::OversizeSkipped { len: 33 }, "{mode:?}");
        assert_eq!(out.events[3], frame(b"{\"id\":3}"), "{mode:?}");
        assert_eq!(out.stats.discarded_bytes, 34, "the CR is discarded with the frame");
    }
    check_every_split(&config, input);
}

#[test]
fn oversize_is_reported_before_its_newline_arrives() {
    let config = cfg(10, OversizePolicy::Skip);
    let mut framer = Framer::new(config);
    {
        let mut push = framer.push(b"{\"id\":1,\"x\":\"");
        assert_eq!(push.next_event(), Ok(Some(Event::OversizeStarted { seen: 13 })));
        assert_eq!(push.next_event(), Ok(None));
    }
    assert!(framer.is_discarding());
    assert_eq!(framer.buffered(), 0, "an oversize frame is never buffered");
    let mut push = framer.push(b"yyyy\"}\n{}\n");
    assert_eq!(push.next_event(), Ok(Some(Event::OversizeSkipped { len: 19 })));
    assert_eq!(push.next_event(), Ok(Some(Event::Frame(&b"{}"[..]))));
}

#[test]
fn fail_policy_is_sticky_and_delivers_what_came_before() {
    let config = cfg(4, OversizePolicy::Fail);
    let mut framer = Framer::new(config);
    let mut push = framer.push(b"ok\nTOO LONG\nok\n");
    assert_eq!(push.next_event(), Ok(Some(Event::Frame(&b"ok"[..]))));
    let err = push.next_event().unwrap_err();
    assert_eq!(err, FrameError::Oversize { seen: 8, max_frame: 4 });
    assert_eq!(push.next_event(), Err(err));
    drop(push);
    assert_eq!(framer.next_event(), Err(err));
    let spare = framer.spare();
    spare[..3].copy_from_slice(b"ok\n");
    framer.commit(3);
    assert_eq!(framer.next_event(), Err(err));
    let stats = framer.stats();
    assert_eq!(stats.frames, 1);
    assert_eq!(stats.discarded_bytes, 8 + 1 + 3 + 3, "everything from the oversize frame on");
    check::check_accounting(&framer, stats);
}

#[test]
fn truncated_partial_frame_at_end_of_stream_is_reported_not_delivered() {
    let config = cfg(64, OversizePolicy::Skip);
    let out = check_against_reference(&config, b"{\"id\":1}\n{\"id\":", &[5]);
    assert_eq!(out.events, vec![frame(b"{\"id\":1}"), Event::Truncated { len: 6, oversize: false }]);
    assert_eq!(out.stats.truncated_bytes, 6);

    let small = cfg(3, OversizePolicy::Skip);
    let out = normalize(&small, run(&small, b"abcdef", &[2], Mode::ReadInto));
    assert_eq!(out.events, vec![Event::OversizeStarted { seen: 0 }, Event::Truncated { len: 6, oversize: true }]);
}

#[test]
fn empty_lines_are_skipped_and_counted_or_delivered() {
    let input = b"\n\r\n{}\n\n";
    let out = check_against_reference(&cfg(64, OversizePolicy::Skip), input, &[1]);
    assert_eq!(out.events, vec![frame(b"{}")]);
    assert_eq!(out.stats.empty_lines, 3);
    let deliver = cfg(64, OversizePolicy::Skip).with_empty_lines(EmptyLines::Deliver);
    let out = check_against_reference(&deliver, input, &[1]);
    assert_eq!(out.events, vec![frame(b""), frame(b""), frame(b"{}"), frame(b"")]);
}

#[test]
fn bom_at_stream_start_is_stripped_by_default_and_kept_on_request() {
    let input = b"\xEF\xBB\xBF{}\n\xEF\xBB\xBF{}\n";
    let out = check_against_reference(&cfg(64, OversizePolicy::Skip), input, &[1]);
    assert_eq!(out.events, vec![frame(b"{}"), frame(b"\xEF\xBB\xBF{}")], "only the first BOM is stripped");
    assert_eq!(out.stats.bom_bytes, 3);
    let keep = cfg(64, OversizePolicy::Skip).with_bom(Bom::Keep);
    let out = check_against_reference(&keep, input, &[2]);
    assert_eq!(out.events, vec![frame(b"\xEF\xBB\xBF{}"), frame(b"\xEF\xBB\xBF{}")]);
    check_every_split(&cfg(64, OversizePolicy::Skip), input);
    // A BOM prefix that turns out not to be one stays in the frame.
    for input in [&b"\xEF\xBB{}\n"[..], b"\xEF\n", b"\xEF\xBB", b"\xEF\xBB\xBF"] {
        check_every_split(&cfg(64, OversizePolicy::Skip), input);
    }
}

#[test]
fn each_byte_is_scanned_once_however_the_frame_is_split() {
    let mut input = vec![b'x'; 100_000];
    input.push(b'\n');
    for mode in MODES {
        for chunk in [1, 7, 4096, 65_536] {
            let mut framer = Framer::new(Config::default());
            let mut events = 0;
            for piece in input.chunks(chunk) {
                match mode {
                    Mode::ReadInto => read_into(&mut framer, piece, |_, _| events += 1),
                    Mode::Push => {
                        let mut push = framer.push(piece);
                        while push.next_event().unwrap().is_some() {
                            events += 1;
                        }
                    }
                }
            }
            assert_eq!(events, 1);
            assert_eq!(framer.scanned(), input.len() as u64, "{mode:?} chunk {chunk}: bytes searched more than once");
        }
    }
}

#[test]
fn buffer_stays_within_max_frame_plus_one_read_and_discarding_does_not_grow_it() {
    let read_size = 4096;
    let config = Config::DEFAULT.with_max_frame(10_000).with_read_size(read_size);
    let cap = config.max_frame + 1 + read_size;
    let mut framer = Framer::new(config);
    let mut input = Vec::new();
    for len in [9_999usize, 10_000, 10_001, 1_000_000, 3, 10_000] {
        input.extend(core::iter::repeat_n(b'a', len));
        input.extend_from_slice(b"\r\n");
    }
    let mut capacity_before_giant = None;
    for piece in input.chunks(3000) {
        read_into(&mut framer, piece, |framer, event| {
            if let Event::OversizeStarted { seen } = event
                && seen > 10_001
                && capacity_before_giant.is_none()
            {
                capacity_before_giant = Some(framer.capacity());
            }
        });
        assert!(framer.capacity() <= cap, "capacity {} over cap {cap}", framer.capacity());
        assert!(framer.buffered() <= config.max_frame + 1);
    }
    let stats = framer.stats();
    assert!(stats.buffered_high_water <= cap as u64);
    assert_eq!((stats.frames, stats.oversize_frames), (4, 2));
    assert_eq!(capacity_before_giant, Some(framer.capacity()), "discarding 1 MB grew the buffer");
}

#[test]
fn any_chunking_gives_the_same_events() {
    let multibyte = "é€𐍈😀 \"quoted\\\" \u{2028}".as_bytes();
    let mut inputs: Vec<Vec<u8>> = vec![
        [b"{\"text\":\"".as_slice(), multibyte, b"\"}\n"].concat(),
        b"a\r\nb\n\n\rc\r\r\n".to_vec(),
        b"\xEF\xBB\xBF{}\r\n{\"x\":\"\xff\xfe\x00\"}\n".to_vec(),
        [b"ok\n".as_slice(), &[b'z'; 40], b"\r\nok\n", &[b'y'; 17], b"\rtail"].concat(),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let configs = |max_frame| {
        [OversizePolicy::Skip, OversizePolicy::Fail]
            .into_iter()
            .flat_map(move |oversize| [true, false].map(|strip_cr| cfg(max_frame, oversize).with_strip_cr(strip_cr)))
    };
    // Hand-written inputs: every cut position, 1-byte reads.
    for input in &inputs {
        for max_frame in [0, 2, 5, 16, 64] {
            for config in configs(max_frame) {
                check_every_split(&config, input);
            }
        }
    }
    // Random inputs: random chunkings, including empty reads.
    for _ in 0..200 {
        let len = rng.below(120) as usize;
        inputs.push((0..len).map(|_| b"ab\r\n\xEF\xBB\xBF\0\xff{}\""[rng.below(12) as usize]).collect());
        let input = inputs.last().unwrap();
        for config in configs(rng.below(20) as usize) {
            let chunks: Vec<usize> = (0..1 + rng.below(6)).map(|_| rng.below(9) as usize).collect();
            check_against_reference(&config, input, &chunks);
        }
    }
}

#[test]
fn no_panic_on_binary_input() {
    let mut rng = Rng(12345);
    for _ in 0..200 {
        let len = rng.below(3000) as usize;
        let input: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let oversize = if rng.below(2) == 0 { OversizePolicy::Skip } else { OversizePolicy::Fail };
        let config = cfg(rng.below(300) as usize, oversize)
            .with_strip_cr(rng.below(2) == 0)
            .with_read_size(1 + rng.below(100) as usize);
        let chunks: Vec<usize> = (0..1 + rng.below(5)).map(|_| rng.below(700) as usize).collect();
        check_against_reference(&config, &input, &chunks);
    }
}

#[test]
fn dropping_a_push_early_loses_no_bytes() {
    let mut framer = Framer::new(Config::default());
    {
        let mut push = framer.push(b"one\ntwo\nthr");
        assert_eq!(push.next_event(), Ok(Some(Event::Frame(&b"one"[..]))));
    }
    let mut push = framer.push(b"ee\n");
    assert_eq!(push.next_event(), Ok(Some(Event::Frame(&b"two"[..]))));
    assert_eq!(push.next_event(), Ok(Some(Event::Frame(&b"three"[..]))));
    assert_eq!(push.next_event(), Ok(None));
}

#[test]
fn frames_inside_a_pushed_chunk_are_slices_of_it() {
    let chunk = *b"{\"a\":1}\n{\"b\":2}\n{\"c\"";
    let base = chunk.as_ptr() as usize;
    let mut framer = Framer::new(Config::default());
    let mut push = framer.push(&chunk);
    let mut offsets = Vec::new();
    while let Some(Event::Frame(frame)) = push.next_event().unwrap() {
        offsets.push(frame.as_ptr() as usize - base);
    }
    drop(push);
    assert_eq!(offsets, vec![0, 8], "frames not borrowed from the chunk");
    assert_eq!(framer.buffered(), 4, "only the partial tail is copied");
}

#[test]
fn finished_only_once_every_event_is_returned() {
    for mode in MODES {
        let mut framer = Framer::new(cfg(4, OversizePolicy::Skip));
        let input = b"ok\n0123456789";
        match mode {
            Mode::ReadInto => {
                framer.spare()[..input.len()].copy_from_slice(input);
                framer.commit(input.len());
            }
            Mode::Push => drop(framer.push(input)),
        }
        framer.finish();
        assert!(!framer.is_finished(), "{mode:?}: events are still owed");
        assert_eq!(framer.next_event(), Ok(Some(Event::Frame(&b"ok"[..]))), "{mode:?}");
        assert_eq!(framer.next_event(), Ok(Some(Event::OversizeStarted { seen: 10 })), "{mode:?}");
        assert!(!framer.is_finished(), "{mode:?}: the truncated oversize frame is still owed");
        assert_eq!(framer.next_event(), Ok(Some(Event::Truncated { len: 10, oversize: true })), "{mode:?}");
        assert!(framer.is_finished(), "{mode:?}");
        assert_eq!(framer.next_event(), Ok(None), "{mode:?}");
    }
    let mut failed = Framer::new(cfg(2, OversizePolicy::Fail));
    drop(failed.push(b"too long\n"));
    failed.finish();
    assert!(failed.next_event().is_err());
    assert!(!failed.is_finished(), "a stopped framer is not finished");
}

#[test]
#[should_panic(expected = "push after finish")]
fn push_after_finish_panics() {
    let mut framer = Framer::new(Config::default());
    framer.finish();
    drop(framer.push(b"{}\n"));
}

/// A frame of `len` bytes and its `\n`.
fn line(len: usize) -> Vec<u8> {
    let mut line = vec![b'x'; len];
    line.push(b'\n');
    line
}

/// Feeds `bytes` in `mode`, in chunks of at most `chunk` bytes, and returns
/// the frames delivered.
fn feed(framer: &mut Framer, mode: Mode, bytes: &[u8], chunk: usize) -> usize {
    let mut frames = 0;
    for piece in bytes.chunks(chunk) {
        match mode {
            Mode::ReadInto => {
                read_into(framer, piece, |_, event| frames += usize::from(matches!(event, Event::Frame(_))))
            }
            Mode::Push => {
                let mut push = framer.push(piece);
                while let Some(event) = push.next_event().unwrap() {
                    frames += usize::from(matches!(event, Event::Frame(_)));
                }
            }
        }
    }
    frames
}

#[test]
fn storage_goes_back_under_the_threshold_after_a_big_frame_followed_by_small_ones() {
    let retain = 256 * 1024;
    let config = Config::DEFAULT.with_retain(retain);
    for mode in MODES {
        let mut framer = Framer::new(config);
        assert_eq!(framer.capacity(), 0, "{mode:?}: a fresh framer allocates nothing");
        assert_eq!(feed(&mut framer, mode, &line(4 << 20), 64 * 1024), 1);
        let big = framer.capacity();
        assert!(big >= 4 << 20, "{mode:?}: the 4 MiB frame needed {big} bytes of storage");
        assert_eq!(framer.stats().buffer_capacity, big as u64, "{mode:?}: the gauge follows");
        let small = line(200).repeat(100);
        assert_eq!(feed(&mut framer, mode, &small, 64 * 1024), 100);
        let after = framer.capacity();
        assert!(after <= retain, "{mode:?}: {after} bytes kept after small frames, threshold {retain}");
        assert_eq!(framer.stats().buffer_capacity, after as u64, "{mode:?}");
        // And it stays there: small frames do not grow it past the threshold.
        assert_eq!(feed(&mut framer, mode, &small.repeat(20), 64 * 1024), 2000);
        assert!(framer.capacity() <= retain, "{mode:?}: {}", framer.capacity());
    }
}

#[test]
fn an_isolated_big_frame_is_given_back_at_the_next_read_and_a_stream_of_them_keeps_its_storage() {
    let config = Config::DEFAULT.with_retain(128 * 1024);
    for mode in MODES {
        let mut framer = Framer::new(config);
        feed(&mut framer, mode, &line(1 << 20), 64 * 1024);
        assert!(framer.capacity() > 512 * 1024, "{mode:?}: {}", framer.capacity());
        // One read finding nothing buffered (read-into: the next `spare`;
        // push: the next chunk) gives it back.
        match mode {
            Mode::ReadInto => drop(framer.spare()),
            Mode::Push => drop(framer.push(b"")),
        }
        assert!(framer.capacity() <= 128 * 1024, "{mode:?}: {}", framer.capacity());

        // Back-to-back big frames: after at most a few premature releases
        // the storage is kept from frame to frame.
        let stream = line(1 << 20).repeat(12);
        let mut releases = 0;
        let mut last = framer.capacity();
        for frame in stream.chunks(stream.len() / 12) {
            feed(&mut framer, mode, frame, 64 * 1024);
            let now = framer.capacity();
            releases += usize::from(now < last);
            last = now;
        }
        let mut later = 0;
        for frame in stream.chunks(stream.len() / 12) {
            feed(&mut framer, mode, frame, 64 * 1024);
            later += usize::from(framer.capacity() < last);
            last = framer.capacity();
        }
        assert!(releases <= 3, "{mode:?}: {releases} releases in the first 12 frames");
        assert_eq!(later, 0, "{mode:?}: storage released again once the stream settled");
    }
}

#[test]
fn read_into_moves_few_bytes_for_64_kib_frames_in_64_kib_reads() {
    // A 64 KiB result plus the rest of its message, as in the framing bench: frames
    // straddle the reads, so nearly every read leaves a partial frame.
    let stream = line(64 * 1024 + 60).repeat(512); // 32 MiB
    let mut framer = Framer::new(Config::DEFAULT);
    assert_eq!(feed(&mut framer, Mode::ReadInto, &stream, 64 * 1024), 512);
    let (moved, read) = (framer.buf.moved, framer.stats().bytes_in);
    // Rolling on nearly every read (the old policy) moved about half of it.
    assert!(moved * 4 < read, "{moved} bytes moved for {read} bytes read");
    assert!(framer.capacity() <= crate::DEFAULT_RETAIN, "{}", framer.capacity());
}

#[test]
fn a_fresh_framer_lends_512_bytes_and_doubles_up_to_the_read_size() {
    let mut framer = Framer::new(Config::DEFAULT);
    assert_eq!(framer.spare().len(), 512);
    let mut lends = Vec::new();
    for _ in 0..8 {
        let spare = framer.spare();
        let n = spare.len();
        lends.push(n);
        spare.fill(b'x');
        framer.commit(n);
    }
    // Each lend is at least the least lend, and each full read doubles it.
    assert!(lends[0] >= 512 && lends[1] >= 1024 && lends[7] >= 64 * 1024, "{lends:?}");
    assert!(framer.capacity() < 256 * 1024, "{}", framer.capacity());
    // A read that does not fill the lend keeps it.
    let mut small = Framer::new(Config::DEFAULT);
    small.spare();
    small.commit(100);
    assert_eq!(small.spare().len(), 512, "the same least lend after the 100 bytes held");
    // Never more than the read size is required.
    let mut tiny = Framer::new(Config::DEFAULT.with_read_size(100));
    assert!(tiny.spare().len() >= 100);
}
