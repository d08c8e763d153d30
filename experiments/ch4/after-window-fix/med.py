import json,glob,os,statistics,sys
rows={}
def collect(pattern, label):
    for c in sorted(glob.glob(pattern)):
        d=json.load(open(c))
        for s in d["servers"]:
            o=s.get("at_overload") or {}
            if not o: continue
            cj=os.path.join(os.path.dirname(c), s.get("capacity_json") or "")
            extra={}
            if os.path.isfile(cj):
                cap=json.load(open(cj)); p=cap["search"]["points"][-1]["runs"][-1]
                x=p["extra"]; a=x["server_stats_after"]; b=x.get("server_stats_before") or {}
                extra["hits"]=a.get("probe_hits",0)-b.get("probe_hits",0)
                extra["misses"]=a.get("probe_misses",0)-b.get("probe_misses",0)
                extra["valid"]=p.get("client_valid")
            rows.setdefault((label,s["server"]),[]).append((o["delivered_mb_s"], o.get("cache_miss_pct",0)/100, o.get("disk_mb_s"), extra))
for pat,label in [(a.split("=")[1],a.split("=")[0]) for a in sys.argv[1:]]:
    collect(pat,label)
for k,v in rows.items():
    dl=[x[0] for x in v]
    print(k[0], k[1], "runs", " / ".join("%.1f"%x for x in dl), "median %.1f"%statistics.median(dl),
          "drive/deliv", " / ".join("%.2f"%x[1] for x in v),
          "hit/miss", " ".join("%s/%s"%(x[3].get("hits"),x[3].get("misses")) for x in v),
          "valid", [x[3].get("valid") for x in v])
