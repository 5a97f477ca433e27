"""PyTorch 1.13 peer of `sparsetrain train --arch lstm`: the RNNModel and training loop of
PyTorch's word_language_model example (Zaremba et al. 2014's setup) with sparsetrain's
defaults: embedding -> dropout -> LSTM (dropout between layers) -> dropout -> decoder;
U(-0.1, 0.1) encoder/decoder init; plain SGD at --lr with gradient-norm clipping; the rate
divided by 4 when validation loss does not improve; batchify into -b streams; BPTT
windows with the hidden state carried and detached; evaluation with 10 streams.

The corpus is a folder with train.txt/valid.txt/test.txt in PTB format, read like
sparsetrain's reader (vocabulary from train in order of first appearance, <unk> for
unknown valid/test words); sparsetrain writes the fortunes split it trains on to
<out>/corpus, so both read the same tokens.

  torch_lstm_lm.py --data runs/x/corpus --epochs 2 [--threads 2] ...   # train; JSON lines
  torch_lstm_lm.py --step [--vocab 10000] [--reps 20] ...              # step time only
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout, tied):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tied:
            if nhid != ninp:
                raise ValueError("--tied needs --emsize equal to --hidden")
            self.decoder.weight = self.encoder.weight
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        if not tied:
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        self.nlayers, self.nhid, self.ntoken = nlayers, nhid, ntoken

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)).view(-1, self.ntoken), hidden

    def init_hidden(self, bsz):
        w = next(self.parameters())
        return (w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid))


def read_split(path, vocab, build):
    if not os.path.isfile(path):
        sys.exit(f"torch_lstm_lm: {path} not found")
    ids = []
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            for w in line.split() + ["<eos>"]:
                if build and w not in vocab:
                    vocab[w] = len(vocab)
                ids.append(vocab.get(w, vocab.get("<unk>")))
    if build and "<unk>" not in vocab:
        vocab["<unk>"] = len(vocab)
    return torch.tensor(ids, dtype=torch.long)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def repackage(h):
    return tuple(v.detach() for v in h)


def evaluate(model, data, bptt, eval_bsz, crit):
    model.eval()
    total, tokens = 0.0, 0
    hidden = model.init_hidden(eval_bsz)
    with torch.no_grad():
        for i in range(0, data.size(0) - 1, bptt):
            x, y = get_batch(data, i, bptt)
            out, hidden = model(x, hidden)
            total += crit(out, y).item() * y.numel()
            tokens += y.numel()
    model.train()
    return total / tokens


def train_step(model, crit, x, y, hidden, lr, clip):
    model.zero_grad()
    out, hidden = model(x, hidden)
    loss = crit(out, y)
    loss.backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)
    return loss.item(), repackage(hidden)


def run_train(a):
    vocab = {}
    train = read_split(os.path.join(a.data, "train.txt"), vocab, True)
    valid = read_split(os.path.join(a.data, "valid.txt"), vocab, False)
    test = read_split(os.path.join(a.data, "test.txt"), vocab, False)
    train_data, val_data, test_data = batchify(train, a.batch), batchify(valid, 10), batchify(test, 10)
    model = RNNModel(len(vocab), a.emsize, a.hidden, a.layers, a.dropout, a.tied)
    crit = nn.CrossEntropyLoss()
    lr, best = a.lr, None
    step_times = []
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        model.train()
        te = time.perf_counter()
        hidden = model.init_hidden(a.batch)
        loss_sum, tokens = 0.0, 0
        for i in range(0, train_data.size(0) - 1, a.bptt):
            x, y = get_batch(train_data, i, a.bptt)
            ts = time.perf_counter()
            loss, hidden = train_step(model, crit, x, y, hidden, lr, a.clip)
            step_times.append((time.perf_counter() - ts) * 1e3)
            loss_sum += loss * y.numel()
            tokens += y.numel()
            if not math.isfinite(loss):
                sys.exit(f"torch_lstm_lm: loss {loss} at epoch {epoch}")
        val = evaluate(model, val_data, a.bptt, 10, crit)
        row = {"impl": "torch", "epoch": epoch, "train_ppl": math.exp(loss_sum / tokens),
               "valid_loss": val, "valid_ppl": math.exp(val), "lr": lr,
               "epoch_s": time.perf_counter() - te}
        print(json.dumps(row), flush=True)
        if best is None or val < best:
            best = val
        else:
            lr /= 4.0
    tst = evaluate(model, test_data, a.bptt, 10, crit)
    steady = step_times[5:] or step_times
    print(json.dumps({"impl": "torch", "final": True, "vocab": len(vocab), "valid_loss": val,
                      "valid_ppl": math.exp(val), "test_loss": tst, "test_ppl": math.exp(tst),
                      "step_ms": sum(steady) / len(steady), "steps": len(step_times),
                      "seconds": time.perf_counter() - t0}), flush=True)


def run_step(a):
    model = RNNModel(a.vocab, a.emsize, a.hidden, a.layers, a.dropout, a.tied)
    crit = nn.CrossEntropyLoss()
    hidden = model.init_hidden(a.batch)
    g = torch.Generator().manual_seed(1)
    times = {"step": [], "fwd": [], "bwd": []}
    for r in range(a.reps + 3):
        x = torch.randint(0, a.vocab, (a.bptt, a.batch), generator=g)
        y = torch.randint(0, a.vocab, (a.bptt * a.batch,), generator=g)
        t0 = time.perf_counter()
        model.zero_grad()
        out, hidden = model(x, hidden)
        loss = crit(out, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-20.0)
        hidden = repackage(hidden)
        t3 = time.perf_counter()
        if r >= 3:
            times["step"].append((t3 - t0) * 1e3)
            times["fwd"].append((t1 - t0) * 1e3)
            times["bwd"].append((t2 - t1) * 1e3)
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print(json.dumps({"bench": "lstm_lm_step", "impl": "torch", "vocab": a.vocab, "emsize": a.emsize,
                      "hidden": a.hidden, "layers": a.layers, "bptt": a.bptt, "batch": a.batch,
                      "threads": a.threads, "reps": a.reps, "step_ms": round(med["step"], 3),
                      "fwd_ms": round(med["fwd"], 3), "bwd_ms": round(med["bwd"], 3),
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder with train.txt, valid.txt, test.txt (PTB format)")
    ap.add_argument("--step", action="store_true", help="time training steps on random tokens")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--emsize", type=int, default=200)
    ap.add_argument("--bptt", type=int, default=35)
    ap.add_argument("-b", "--batch", type=int, default=20)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--lr", type=float, default=20.0)
    ap.add_argument("--clip", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=10000, help="--step only")
    ap.add_argument("--reps", type=int, default=20, help="--step only")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if a.step:
        run_step(a)
    elif a.data:
        run_train(a)
    else:
        ap.error("give --data DIR (train) or --step")


if __name__ == "__main__":
    main()
