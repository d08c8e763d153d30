use proptest::prelude::*;

use super::cmsd::{CmsdDynamic, CmsdHop, CmsdStatic};
use super::*;

/// CTA-5004's example with every key (its section 4), as the four headers.
const SPEC_HEADERS: [(&str, &str); 4] = [
    ("CMCD-Object", "br=3200,d=4004,ot=v,tb=6141"),
    (
        "CMCD-Request",
        "bl=21300,dl=18500,mtp=48100,nor=\"..%2F300kbps%2Ftrack.m4v\",nrr=\"12323-48763\",su",
    ),
    (
        "CMCD-Session",
        "cid=\"faec5fc2-ac30-11ea-bb37-0242ac130002\",pr=1.08,sf=d,sid=\"6e2fb550-c457-11e9-bb97-0800200c9a66\",st=v",
    ),
    ("CMCD-Status", "bs,rtp=12000"),
];

/// The same example as one query parameter.
const SPEC_QUERY: &str = concat!(
    "CMCD=bl%3D21300%2Cbr%3D3200%2Cbs%2Ccid%3D%22faec5fc2-ac30-11ea-bb37-0242ac130002%22",
    "%2Cd%3D4004%2Cdl%3D18500%2Cmtp%3D48100%2Cnor%3D%22..%252F300kbps%252Ftrack.m4v%22%2Cnrr%3D%2212323-48763%22",
    "%2Cot%3Dv%2Cpr%3D1.08%2Crtp%3D12000%2Csf%3Dd%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22%2Cst%3Dv%2Csu%2Ctb%3D6141",
);

fn spec_example() -> Cmcd {
    Cmcd {
        br: Some(3200),
        d: Some(4004),
        ot: Some(ObjectType::Video),
        tb: Some(6141),
        bl: Some(21300),
        dl: Some(18500),
        mtp: Some(48100),
        nor: vec!["..%2F300kbps%2Ftrack.m4v".into()],
        nrr: Some("12323-48763".into()),
        su: true,
        cid: Some("faec5fc2-ac30-11ea-bb37-0242ac130002".into()),
        pr: Some(1.08),
        sf: Some(StreamingFormat::Dash),
        sid: Some("6e2fb550-c457-11e9-bb97-0800200c9a66".into()),
        st: Some(StreamType::Vod),
        v: None,
        bs: true,
        rtp: Some(12000),
        ..Cmcd::default()
    }
}

/// A header lookup over `(name, value)` pairs, by lower-case name.
fn lookup<'a>(headers: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
    move |name| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

fn owned(headers: &[(Header, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(h, v)| (h.name(), v.as_str()))
        .collect()
}

#[test]
fn the_spec_example_parses_from_the_headers_and_the_query() {
    assert_eq!(Cmcd::from_headers(lookup(&SPEC_HEADERS)), spec_example());
    assert_eq!(Cmcd::from_query(SPEC_QUERY), spec_example());
    assert_eq!(
        Cmcd::from_request(&format!("/300kbps/track.m4v?{SPEC_QUERY}"), |_| None),
        spec_example()
    );
}

#[test]
fn the_spec_example_encodes_as_the_spec_writes_it() {
    let c = spec_example();
    assert_eq!(owned(&c.to_headers()), SPEC_HEADERS);
    assert_eq!(c.to_query(), SPEC_QUERY);
    let keys: Vec<&str> = c.items().into_iter().map(|(k, _)| k).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
    assert_eq!(keys.len(), 17, "every v1 key but v");
}

#[test]
fn selections_of_keys_and_custom_keys() {
    // a selection, in the query
    let c = Cmcd::from_query(concat!(
        "CMCD=br%3D3200%2Cbs%2Cd%3D4004%2Cmtp%3D25400%2Cot%3Dv%2Crtp%3D15000",
        "%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22%2Ctb%3D6000"
    ));
    assert_eq!(
        (c.br, c.bs, c.d, c.mtp, c.ot, c.rtp, c.tb),
        (
            Some(3200),
            true,
            Some(4004),
            Some(25400),
            Some(ObjectType::Video),
            Some(15000),
            Some(6000)
        )
    );
    assert_eq!(
        owned(&c.to_headers()),
        [
            ("CMCD-Object", "br=3200,d=4004,ot=v,tb=6000"),
            ("CMCD-Request", "mtp=25400"),
            (
                "CMCD-Session",
                "sid=\"6e2fb550-c457-11e9-bb97-0800200c9a66\""
            ),
            ("CMCD-Status", "bs,rtp=15000"),
        ]
    );
    // custom keys (reverse-domain prefix) are kept, typed by their syntax,
    // and sent in CMCD-Request
    let c = Cmcd::parse(
        "com.example-myNumericKey=500,com.example-myStringKey=\"myStringValue\",com.example-on,com.example-t=tok/1,com.example-d=-1.5",
    );
    let want: BTreeMap<String, Value> = [
        ("com.example-myNumericKey", Value::Integer(500)),
        (
            "com.example-myStringKey",
            Value::String("myStringValue".into()),
        ),
        ("com.example-on", Value::True),
        ("com.example-t", Value::Token("tok/1".into())),
        ("com.example-d", Value::Decimal(-1.5)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(c.custom, want);
    assert_eq!(
        owned(&c.to_headers()),
        [(
            "CMCD-Request",
            "com.example-d=-1.5,com.example-myNumericKey=500,com.example-myStringKey=\"myStringValue\",com.example-on,com.example-t=tok/1"
        )]
    );
    assert!(Cmcd::default().to_headers().is_empty());
    assert_eq!(Cmcd::default().to_query(), "CMCD=");
}

#[test]
fn keys_are_read_from_any_header_and_the_first_value_wins() {
    // br belongs in CMCD-Object, but a player that sends it elsewhere is heard
    let h = [("cmcd-request", "bl=500,br=800"), ("cmcd-status", "br=900")];
    let c = Cmcd::from_headers(lookup(&h));
    assert_eq!((c.br, c.bl), (Some(800), Some(500)));
    // Object is read before Request, Status before Session
    let h = [("cmcd-request", "br=1"), ("cmcd-object", "br=2")];
    assert_eq!(Cmcd::from_headers(lookup(&h)).br, Some(2));
    let h = [("cmcd-session", "rtp=1"), ("cmcd-status", "rtp=2")];
    assert_eq!(Cmcd::from_headers(lookup(&h)).rtp, Some(2));
    assert_eq!(Cmcd::parse("br=5,br=6").br, Some(5));
}

#[test]
fn a_header_wins_over_the_query_for_the_same_key() {
    let h = [("cmcd-object", "br=100")];
    let c = Cmcd::from_request("/v.mp4?x=1&CMCD=br%3D800%2Cbl%3D500#frag", lookup(&h));
    assert_eq!((c.br, c.bl), (Some(100), Some(500)));
    // the first CMCD parameter; `+` is a space; a fragment is not the query
    let c = Cmcd::from_query("CMCD=sid%3D%22a+b%22&CMCD=br%3D1");
    assert_eq!((c.sid.as_deref(), c.br), (Some("a b"), None));
    assert_eq!(Cmcd::from_query("x=1#CMCD=br%3D1"), Cmcd::default());
    assert_eq!(Cmcd::from_query("?CMCD=br%3D7").br, Some(7));
    assert_eq!(Cmcd::from_request("/v.mp4", lookup(&h)).br, Some(100));
    assert!(Cmcd::from_request("/v.mp4?cmcd=br%3D1", |_| None).is_empty());
}

#[test]
fn malformed_items_are_skipped_and_never_an_error() {
    for bad in [
        "",
        ",,,",
        "br",
        "br=",
        "=5",
        "br=-1",
        "br=1e3",
        "br=+5",
        "br=fast",
        "br=\"3200\"",
        "br=99999999999999999999",
        "\"unterminated,br=5",
        "pr=1e3",
        "pr=.5",
        "pr=NaN",
        "pr=inf",
        "ot=x",
        "sf=dash",
        "st=V",
        "sid=unquoted",
        "sid=\"a\"b\"",
        "cid=\"open",
        "su=1",
        "bs=true",
        "bad key=1",
        "k\u{e9}y=1",
        "x-y=1.",
        "x-y=@",
    ] {
        assert!(
            Cmcd::parse(bad).is_empty(),
            "{bad:?}: {:?}",
            Cmcd::parse(bad)
        );
    }
    // a malformed item leaves the others alone
    let c = Cmcd::parse(" br = fast , bl= 300 ,d=4004,  su ");
    assert_eq!((c.br, c.bl, c.d, c.su), (None, Some(300), Some(4004), true));
    // a quoted comma does not split, an escaped quote does not end a string
    let c = Cmcd::parse("cid=\"a,br=9,b\\\",bl=1\",sid=\"x\",br=800");
    assert_eq!(c.cid.as_deref(), Some("a,br=9,b\",bl=1"));
    assert_eq!((c.br, c.bl, c.sid.as_deref()), (Some(800), None, Some("x")));
    // a query parameter that does not decode gives nothing
    for bad in ["CMCD=br%3", "CMCD=br%3D1%zz", "CMCD=br%3D1%FF"] {
        assert!(Cmcd::from_query(bad).is_empty(), "{bad}");
    }
    // zero is a value (what it means is the reader's business)
    assert_eq!(Cmcd::parse("br=0").br, Some(0));
}

#[test]
fn tokens_and_headers_name_themselves() {
    for &t in ObjectType::ALL {
        assert_eq!(ObjectType::from_token(t.token()), Some(t));
    }
    for &t in StreamingFormat::ALL {
        assert_eq!(StreamingFormat::from_token(t.token()), Some(t));
    }
    for &t in StreamType::ALL {
        assert_eq!(StreamType::from_token(t.token()), Some(t));
    }
    for &t in Event::ALL {
        assert_eq!(Event::from_token(t.token()), Some(t));
    }
    for &t in PlayerState::ALL {
        assert_eq!(PlayerState::from_token(t.token()), Some(t));
    }
    for h in Header::ALL {
        assert_eq!(h.name().to_ascii_lowercase(), h.lower());
    }
    for (keys, h) in [
        (&["br", "d", "ot", "tb"][..], Header::Object),
        (
            &["bl", "dl", "mtp", "nor", "nrr", "su", "com.x-y"][..],
            Header::Request,
        ),
        (&["cid", "pr", "sf", "sid", "st", "v"][..], Header::Session),
        (&["bs", "rtp"][..], Header::Status),
        // version 2
        (&["tpb"][..], Header::Object),
        (
            &["df", "ltc", "pb", "rc", "sn", "ts", "ttfb", "ttlb", "url"][..],
            Header::Request,
        ),
        (&["cdn", "msd"][..], Header::Session),
        (&["bg", "e", "sta"][..], Header::Status),
    ] {
        for k in keys {
            assert_eq!(Header::of(k), h, "{k}");
        }
    }
}

#[test]
fn version_2_keys_parse_and_encode_into_their_headers_with_v_2() {
    let h = [
        ("CMCD-Object", "br=3200,d=4004,ot=v,tb=6141,tpb=4500"),
        (
            "CMCD-Request",
            "bl=21300,df=3,ltc=2500,nor=(\"seg2.m4v\" \"seg3.m4v\"),pb=1600,rc=200,sn=7,ts=1732700000000,ttfb=35,ttlb=412,url=\"https://cdn.example/v/seg1.m4v\"",
        ),
        ("CMCD-Session", "cdn=\"cdn-a\",msd=250,sid=\"s1\",v=2"),
        ("CMCD-Status", "bg,e=ps,sta=p"),
    ];
    let c = Cmcd::try_from_headers(lookup(&h)).unwrap();
    let want = Cmcd {
        br: Some(3200),
        d: Some(4004),
        ot: Some(ObjectType::Video),
        tb: Some(6141),
        tpb: Some(4500),
        bl: Some(21300),
        df: Some(3),
        ltc: Some(2500),
        nor: vec!["seg2.m4v".into(), "seg3.m4v".into()],
        pb: Some(1600),
        rc: Some(200),
        sn: Some(7),
        ts: Some(1_732_700_000_000),
        ttfb: Some(35),
        ttlb: Some(412),
        url: Some("https://cdn.example/v/seg1.m4v".into()),
        cdn: Some("cdn-a".into()),
        msd: Some(250),
        sid: Some("s1".into()),
        v: Some(2),
        bg: true,
        e: Some(Event::PlayState),
        sta: Some(PlayerState::Playing),
        ..Cmcd::default()
    };
    assert_eq!(c, want);
    assert!(c.is_v2());
    assert_eq!(owned(&c.to_headers()), h);
    // `v=2` is added when a version-2 key is set and `v` is not
    let bare = Cmcd {
        v: None,
        ..want.clone()
    };
    assert_eq!(owned(&bare.to_headers()), h);
    assert_eq!(bare.clone().versioned(), want);
    // version 1 omits `v`, and an explicit `v` is sent as set
    assert!(!spec_example().is_v2());
    assert_eq!(spec_example().versioned(), spec_example());
    assert!(!spec_example().to_list().contains("v="));
    let one = Cmcd {
        v: Some(1),
        ttfb: Some(9),
        ..Cmcd::default()
    };
    assert_eq!(one.to_list(), "ttfb=9,v=1");
}

#[test]
fn nor_is_one_string_or_an_inner_list_of_strings() {
    assert_eq!(Cmcd::parse("nor=\"a.m4s\"").nor, ["a.m4s"]);
    assert_eq!(
        Cmcd::parse("nor=( \"a b.m4s\"  \"c,d\\\"e\" )").nor,
        ["a b.m4s", "c,d\"e"]
    );
    assert_eq!(Cmcd::parse("nor=(\"a\")").nor, ["a"]);
    assert!(Cmcd::parse("nor=()").nor.is_empty());
    // one is written as version 1 writes it, several as an inner list
    let one = Cmcd::parse("nor=(\"a\")");
    assert_eq!(
        (one.to_list(), one.is_v2()),
        ("nor=\"a\"".to_string(), false)
    );
    let two = Cmcd::parse("nor=(\"a\" \"b\")");
    assert_eq!(two.to_list(), "nor=(\"a\" \"b\"),v=2");
    assert_eq!(two.to_query(), "CMCD=nor%3D%28%22a%22%20%22b%22%29%2Cv%3D2");
    assert_eq!(Cmcd::from_query(&two.to_query()), two.versioned());
    // the first value wins, an empty list being none
    assert_eq!(Cmcd::parse("nor=(),nor=\"x\",nor=\"y\"").nor, ["x"]);
}

#[test]
fn malformed_values_are_errors_naming_the_key_when_strict() {
    for (list, want) in [
        ("bl=abc", "bl: not an integer: \"abc\""),
        ("br=800,bl=abc", "bl: not an integer: \"abc\""),
        ("br=-1", "br: not an integer: \"-1\""),
        ("ttfb=1.5", "ttfb: not an integer: \"1.5\""),
        (
            "ttlb=99999999999999999999",
            "ttlb: not an integer: \"99999999999999999999\"",
        ),
        ("rc=\"200\"", "rc: not an integer: \"\\\"200\\\"\""),
        ("ts", "ts: no value"),
        ("br", "br: no value"),
        ("pr=fast", "pr: not a decimal: \"fast\""),
        ("pr=1.", "pr: not a decimal: \"1.\""),
        ("sid=unquoted", "sid: not a string: \"unquoted\""),
        ("url=\"open", "url: not a string: \"\\\"open\""),
        ("nor=x", "nor: not a string: \"x\""),
        (
            "nor=(\"a\" b)",
            "nor: not a list of strings: \"(\\\"a\\\" b)\"",
        ),
        ("nor=(\"a\"", "nor: not a list of strings: \"(\\\"a\\\"\""),
        ("su=1", "su: not a boolean: \"1\""),
        ("bg=true", "bg: not a boolean: \"true\""),
        ("ot=x", "ot: not one of its tokens: \"x\""),
        ("sf=dash", "sf: not one of its tokens: \"dash\""),
        ("e=zz", "e: not one of its tokens: \"zz\""),
        ("sta=P", "sta: not one of its tokens: \"P\""),
        ("bad key=1", "bad key: not a key: \"1\""),
        ("=5", ": not a key: \"5\""),
        ("com.example-x=@", "com.example-x: not a value: \"@\""),
    ] {
        let err = Cmcd::try_parse(list).unwrap_err();
        assert_eq!(err.to_string(), want, "{list}");
        // leniently the item is skipped, and only it
        let mut c = Cmcd::default();
        let mut errors = Vec::new();
        c.read_reporting(&format!("mtp=100,{list}"), &mut errors);
        assert_eq!(errors, [err], "{list}");
        assert_eq!(c.mtp, Some(100), "{list}");
    }
    let err = Cmcd::try_parse("bl=abc").unwrap_err();
    assert_eq!(
        (err.key.as_str(), err.problem, err.value.as_deref()),
        ("bl", Problem::NotAnInteger, Some("abc"))
    );
    // every error, in order; the good items kept
    let mut c = Cmcd::default();
    let mut errors = Vec::new();
    c.read_reporting("br=x,bl=500,d=y,su", &mut errors);
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["br", "d"]);
    assert_eq!((c.bl, c.su), (Some(500), true));
    // booleans as RFC 8941 writes them; empty items are no error
    let c = Cmcd::try_parse("su=?1,bs=?0,,bg").unwrap();
    assert_eq!((c.su, c.bs, c.bg), (true, false, true));
    assert_eq!(Cmcd::try_parse(""), Ok(Cmcd::default()));
    // the spec's example is well-formed
    assert_eq!(
        Cmcd::try_from_headers(lookup(&SPEC_HEADERS)),
        Ok(spec_example())
    );
    assert_eq!(Cmcd::try_from_query(SPEC_QUERY), Ok(spec_example()));
    // the headers in order Object, Request, Status, Session
    let h = [("cmcd-session", "sid=1"), ("cmcd-status", "rtp=x")];
    assert_eq!(
        Cmcd::try_from_headers(lookup(&h)).unwrap_err().to_string(),
        "rtp: not an integer: \"x\""
    );
    // the query: a parameter that does not decode, an item that does not parse
    assert_eq!(
        Cmcd::try_from_query("a=1&CMCD=br%3")
            .unwrap_err()
            .to_string(),
        "CMCD: not percent-encoded UTF-8: \"br%3\""
    );
    assert_eq!(
        Cmcd::try_from_query("CMCD=br%3Dx").unwrap_err().to_string(),
        "br: not an integer: \"x\""
    );
    assert_eq!(Cmcd::try_from_query("x=1"), Ok(Cmcd::default()));
    // the lenient parsers, the server's, never fail
    assert!(Cmcd::from_query("CMCD=br%3").is_empty());
    assert_eq!(
        Cmcd::from_request("/s?CMCD=br%3Dx%2Cbl%3D5", |_| Some("d=?")).bl,
        Some(5)
    );
}

#[test]
fn cmsd_static_parses_and_encodes() {
    let s = CmsdStatic::try_parse("ot=v, d=4000 ,st=v,su,sf=d,br=3200,at=1732700000000,ht=500,nor=\"seg2.m4v\",nrr=\"0-99\",v=1,com.example-k=5").unwrap();
    assert_eq!(
        s,
        CmsdStatic {
            at: Some(1_732_700_000_000),
            br: Some(3200),
            d: Some(4000),
            ht: Some(500),
            nor: Some("seg2.m4v".into()),
            nrr: Some("0-99".into()),
            ot: Some(ObjectType::Video),
            sf: Some(StreamingFormat::Dash),
            st: Some(StreamType::Vod),
            su: true,
            v: Some(1),
            custom: [("com.example-k".to_string(), Value::Integer(5))].into(),
        }
    );
    assert_eq!(
        s.encode(),
        "at=1732700000000,br=3200,com.example-k=5,d=4000,ht=500,nor=\"seg2.m4v\",nrr=\"0-99\",ot=v,sf=d,st=v,su,v=1"
    );
    assert_eq!(
        CmsdStatic::parse("ot=v,d=4000,st=v").encode(),
        "d=4000,ot=v,st=v"
    );
    assert!(CmsdStatic::default().is_empty());
    assert_eq!(CmsdStatic::default().encode(), "");
    // errors name the key; leniently the key is skipped
    for (value, want) in [
        ("d=4s", "d: not an integer: \"4s\""),
        ("ot=video", "ot: not one of its tokens: \"video\""),
        ("su=yes", "su: not a boolean: \"yes\""),
        ("nor=seg2", "nor: not a string: \"seg2\""),
        ("d=4000;x=1", "d: not an integer: \"4000;x=1\""),
        ("at", "at: no value"),
    ] {
        assert_eq!(CmsdStatic::try_parse(value).unwrap_err().to_string(), want);
        assert_eq!(CmsdStatic::parse(&format!("{value},br=1")).br, Some(1));
    }
}

#[test]
fn cmsd_dynamic_parses_and_encodes_hop_by_hop() {
    let d = CmsdDynamic::try_parse("\"cdn-a\";etp=96000;rd=12;mb=3000").unwrap();
    assert_eq!(
        d.hops,
        [CmsdHop {
            server: "cdn-a".into(),
            etp: Some(96000),
            rd: Some(12),
            mb: Some(3000),
            ..CmsdHop::default()
        }]
    );
    assert_eq!(d.encode(), "\"cdn-a\";etp=96000;mb=3000;rd=12");
    // several hops; a token identifier; du; unknown parameters kept
    let d = CmsdDynamic::try_parse(
        "\"origin;1\";rtt=40 , edge-7 ; du ; com.example-tier=\"gold\";etp=1",
    )
    .unwrap();
    assert_eq!(d.hops.len(), 2);
    assert_eq!(
        (d.hops[0].server.as_str(), d.hops[0].rtt),
        ("origin;1", Some(40))
    );
    assert_eq!(
        (d.hops[1].server.as_str(), d.hops[1].du, d.hops[1].etp),
        ("edge-7", true, Some(1))
    );
    assert_eq!(
        d.hops[1].custom.get("com.example-tier"),
        Some(&Value::String("gold".into()))
    );
    assert_eq!(
        d.encode(),
        "\"origin;1\";rtt=40,\"edge-7\";com.example-tier=\"gold\";du;etp=1"
    );
    assert_eq!(CmsdDynamic::parse(&d.encode()), d);
    assert_eq!(CmsdDynamic::default().encode(), "");
    // errors name the key (a hop's identifier: the header)
    for (value, want) in [
        ("\"a\";etp=fast", "etp: not an integer: \"fast\""),
        ("\"a\";rd=-3", "rd: not an integer: \"-3\""),
        ("\"a\";du=1", "du: not a boolean: \"1\""),
        ("\"a\";mb", "mb: no value"),
        ("\"a\";=1", ": not a key: \"1\""),
        ("5;rtt=1", "CMSD-Dynamic: not a value: \"5\""),
        ("\"a\"x;rtt=1", "CMSD-Dynamic: not a value: \"\\\"a\\\"x\""),
    ] {
        assert_eq!(CmsdDynamic::try_parse(value).unwrap_err().to_string(), want);
    }
    // leniently: a bad key is skipped, a hop without an identifier too
    let d = CmsdDynamic::parse("\"a\";etp=fast;rtt=3,5;rtt=1,\"b\"");
    let got: Vec<(&str, Option<u64>, Option<u64>)> = d
        .hops
        .iter()
        .map(|h| (h.server.as_str(), h.etp, h.rtt))
        .collect();
    assert_eq!(got, [("a", None, Some(3)), ("b", None, None)]);
}

fn text() -> impl Strategy<Value = String> {
    // quotes, backslashes, commas, equals, spaces, percent signs, non-ASCII
    "[ -~é\u{1F3AC}]{0,24}"
}

fn decimal() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        (0u32..100_000).prop_map(|n| f64::from(n) / 100.0),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::True),
        any::<i64>().prop_map(Value::Integer),
        decimal().prop_map(Value::Decimal),
        text().prop_map(Value::String),
        "[a-zA-Z*][a-zA-Z0-9:/!#$%&'*+.^_`|~-]{0,8}".prop_map(Value::Token),
    ]
}

fn cmcd() -> impl Strategy<Value = Cmcd> {
    use proptest::option::of;
    use proptest::sample::select;
    let int = || of(any::<u64>());
    let string = || of(text());
    let object = (int(), int(), of(select(ObjectType::ALL)), int(), int());
    let request = (
        int(),
        int(),
        int(),
        int(),
        int(),
        proptest::collection::vec(text(), 0..4),
        string(),
        int(),
        int(),
        int(),
        any::<bool>(),
    );
    let report = (int(), int(), int(), string());
    let session = (
        string(),
        string(),
        int(),
        of(decimal()),
        of(select(StreamingFormat::ALL)),
        string(),
        of(select(StreamType::ALL)),
        int(),
    );
    let status = (
        any::<bool>(),
        any::<bool>(),
        of(select(Event::ALL)),
        int(),
        of(select(PlayerState::ALL)),
    );
    let custom =
        proptest::collection::btree_map("[a-z]{1,4}\\.[a-z]{1,4}-[a-zA-Z]{1,6}", value(), 0..4);
    (object, request, report, session, status, custom).prop_map(
        |(
            (br, d, ot, tb, tpb),
            (bl, dl, df, ltc, mtp, nor, nrr, pb, rc, sn, su),
            (ts, ttfb, ttlb, url),
            (cdn, cid, msd, pr, sf, sid, st, v),
            (bg, bs, e, rtp, sta),
            custom,
        )| Cmcd {
            br,
            d,
            ot,
            tb,
            tpb,
            bl,
            dl,
            df,
            ltc,
            mtp,
            nor,
            nrr,
            pb,
            rc,
            sn,
            su,
            ts,
            ttfb,
            ttlb,
            url,
            cdn,
            cid,
            msd,
            pr,
            sf,
            sid,
            st,
            v,
            bg,
            bs,
            e,
            rtp,
            sta,
            custom,
        },
    )
}

fn cmsd_custom() -> impl Strategy<Value = BTreeMap<String, Value>> {
    proptest::collection::btree_map("[a-z]{1,4}\\.[a-z]{1,4}-[a-zA-Z]{1,6}", value(), 0..3)
}

fn cmsd_static() -> impl Strategy<Value = CmsdStatic> {
    use proptest::option::of;
    use proptest::sample::select;
    let int = || of(any::<u64>());
    (
        (int(), int(), int(), int(), of(text()), of(text())),
        (
            of(select(ObjectType::ALL)),
            of(select(StreamingFormat::ALL)),
            of(select(StreamType::ALL)),
            any::<bool>(),
            int(),
        ),
        cmsd_custom(),
    )
        .prop_map(
            |((at, br, d, ht, nor, nrr), (ot, sf, st, su, v), custom)| CmsdStatic {
                at,
                br,
                d,
                ht,
                nor,
                nrr,
                ot,
                sf,
                st,
                su,
                v,
                custom,
            },
        )
}

fn cmsd_dynamic() -> impl Strategy<Value = CmsdDynamic> {
    use proptest::option::of;
    let int = || of(any::<u64>());
    let hop = (
        text(),
        any::<bool>(),
        int(),
        int(),
        int(),
        int(),
        cmsd_custom(),
    )
        .prop_map(|(server, du, etp, mb, rd, rtt, custom)| CmsdHop {
            server,
            du,
            etp,
            mb,
            rd,
            rtt,
            custom,
        });
    proptest::collection::vec(hop, 0..4).prop_map(|hops| CmsdDynamic { hops })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// parse(encode(x)) == x, in each form.
    #[test]
    fn round_trips(c in cmcd()) {
        // what is sent: `v=2` added when a version-2 key is set
        let sent = c.clone().versioned();
        prop_assert_eq!(&Cmcd::parse(&c.to_list()), &sent);
        prop_assert_eq!(&Cmcd::from_query(&c.to_query()), &sent);
        prop_assert_eq!(&Cmcd::try_parse(&c.to_list()), &Ok(sent.clone()));
        prop_assert_eq!(&Cmcd::try_from_query(&c.to_query()), &Ok(sent.clone()));
        prop_assert_eq!(sent.v.is_some(), c.v.is_some() || c.is_v2());
        let headers: Vec<(&str, String)> =
            c.to_headers().into_iter().map(|(h, v)| (h.lower(), v)).collect();
        let lookup = |name: &str| {
            headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
        };
        prop_assert_eq!(&Cmcd::from_headers(lookup), &sent);
        prop_assert_eq!(&Cmcd::try_from_headers(lookup), &Ok(sent.clone()));
        // every key in its header, in alphabetical order
        for (h, list) in c.to_headers() {
            let keys: Vec<&str> = crate::parse::split(&list, ',')
                .map(|i| i.split('=').next().unwrap_or(""))
                .collect();
            prop_assert!(keys.iter().all(|k| Header::of(k) == h), "{list}");
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "{list}");
        }
    }

    /// CMSD: parse(encode(x)) == x, lenient and strict.
    #[test]
    fn cmsd_round_trips(s in cmsd_static(), d in cmsd_dynamic()) {
        prop_assert_eq!(&CmsdStatic::parse(&s.encode()), &s);
        prop_assert_eq!(&CmsdStatic::try_parse(&s.encode()), &Ok(s.clone()));
        prop_assert_eq!(&CmsdDynamic::parse(&d.encode()), &d);
        prop_assert_eq!(&CmsdDynamic::try_parse(&d.encode()), &Ok(d.clone()));
    }

    /// Arbitrary text never panics the parsers, and what they make of it
    /// encodes and parses back to the same (the fuzz target's property).
    #[test]
    fn arbitrary_text_is_parsed_without_panic(
        s in "\\PC{0,80}",
        q in "[%0-9A-Fa-f=,&#?+CMD\"]{0,40}",
        l in "[a-z0-9=,;\" ()?.*-]{0,40}",
    ) {
        for text in [&s, &l] {
            let c = Cmcd::parse(text);
            prop_assert_eq!(Cmcd::parse(&c.to_list()), c.clone().versioned());
            if let Ok(strict) = Cmcd::try_parse(text) {
                prop_assert_eq!(&strict, &c);
            }
            let st = CmsdStatic::parse(text);
            prop_assert_eq!(CmsdStatic::parse(&st.encode()), st);
            let dy = CmsdDynamic::parse(text);
            prop_assert_eq!(CmsdDynamic::parse(&dy.encode()), dy);
        }
        let c = Cmcd::from_query(&s);
        prop_assert_eq!(Cmcd::from_query(&c.to_query()), c.versioned());
        let c = Cmcd::from_query(&q);
        prop_assert_eq!(Cmcd::from_query(&c.to_query()), c.versioned());
        let _ = Cmcd::try_from_query(&q);
        let _ = Cmcd::from_request(&format!("/x?{q}"), |_| Some(s.as_str()));
    }
}
