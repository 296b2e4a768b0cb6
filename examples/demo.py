# A sample model-written program: it computes, prints, calls a host binding
# and hands back a value.
import statistics

samples = [3, 1, 4, 1, 5, 9, 2, 6]
print("mean", statistics.mean(samples))

reply = echo(note="bindings are ordinary Python calls", n=len(samples))
print("host replied", reply)

{"median": statistics.median(samples), "sorted": sorted(samples), "reply": reply}
