import json,sys
for f in sys.argv[1:]:
    d=json.load(open(f)); m=d['profile']; m=m.get('model',m)
    ln=d['measure']['line_latency_ns']
    c=d['compare'][0]['sizes']
    within=sum(1 for s in c if s['pick_slowdown']<=0.1)
    fits={x['protocol']:(round(x['alpha_us'],3),round(x['gbps'],2)) for x in d['measure']['fits']}
    print(f.split('/')[-1], 'line min/med/max %.0f/%.0f/%.0f retried %s kept %s'%(ln['min'],ln['median'],ln['max'],ln.get('runs_retried'),ln.get('runs_kept_far')),
      '| sweep fits',fits,'| model gbps %.2f peer %.2f mem %.2f'%(m['intra']['gbps'],m['peer_gbps'],m['mem_gbps']),
      '| picks within 10%%: %d/7'%within, ' '.join('%s:%s(%.0f%%)'%(s['bytes'],s['pick'],s['pick_slowdown']*100) for s in c))
