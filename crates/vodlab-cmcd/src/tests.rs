use proptest::prelude::*;

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
        nor: Some("..%2F300kbps%2Ftrack.m4v".into()),
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
        custom: BTreeMap::new(),
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
    ] {
        for k in keys {
            assert_eq!(Header::of(k), h, "{k}");
        }
    }
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
    let int = || proptest::option::of(any::<u64>());
    let string = || proptest::option::of(text());
    let object = (
        int(),
        int(),
        proptest::option::of(proptest::sample::select(ObjectType::ALL)),
        int(),
    );
    let request = (int(), int(), int(), string(), string(), any::<bool>());
    let session = (
        string(),
        proptest::option::of(decimal()),
        proptest::option::of(proptest::sample::select(StreamingFormat::ALL)),
        string(),
        proptest::option::of(proptest::sample::select(StreamType::ALL)),
        int(),
    );
    let status = (any::<bool>(), int());
    let custom =
        proptest::collection::btree_map("[a-z]{1,4}\\.[a-z]{1,4}-[a-zA-Z]{1,6}", value(), 0..4);
    (object, request, session, status, custom).prop_map(
        |(
            (br, d, ot, tb),
            (bl, dl, mtp, nor, nrr, su),
            (cid, pr, sf, sid, st, v),
            (bs, rtp),
            custom,
        )| Cmcd {
            br,
            d,
            ot,
            tb,
            bl,
            dl,
            mtp,
            nor,
            nrr,
            su,
            cid,
            pr,
            sf,
            sid,
            st,
            v,
            bs,
            rtp,
            custom,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// parse(encode(x)) == x, in each form.
    #[test]
    fn round_trips(c in cmcd()) {
        prop_assert_eq!(&Cmcd::parse(&c.to_list()), &c);
        prop_assert_eq!(&Cmcd::from_query(&c.to_query()), &c);
        let headers: Vec<(&str, String)> =
            c.to_headers().into_iter().map(|(h, v)| (h.lower(), v)).collect();
        let got = Cmcd::from_headers(|name| {
            headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
        });
        prop_assert_eq!(&got, &c);
        // every key in its header, in alphabetical order
        for (h, list) in c.to_headers() {
            let keys: Vec<&str> = crate::parse::split(&list)
                .map(|i| i.split('=').next().unwrap_or(""))
                .collect();
            prop_assert!(keys.iter().all(|k| Header::of(k) == h), "{list}");
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "{list}");
        }
    }

    /// Arbitrary text never panics the parser.
    #[test]
    fn arbitrary_text_is_parsed_without_panic(s in "\\PC{0,80}", q in "[%0-9A-Fa-f=,&#?+CMD\"]{0,40}") {
        let _ = Cmcd::parse(&s);
        let _ = Cmcd::from_query(&s);
        let _ = Cmcd::from_query(&q);
        let _ = Cmcd::from_request(&format!("/x?{q}"), |_| Some(s.as_str()));
    }
}
