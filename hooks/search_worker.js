// Material's search worker, with Chinese queries cut into the index's own words first, and
// words that carry no meaning alone left out of a query.
//
// Material cuts a run of Chinese characters in a query into words it finds in the index
// (integrations/search/query/segment), but never lets a word end on the run's last character:
// "梯度惩罚" became "梯度" alone, and every section that says 梯度 matched as well as the one
// about 梯度惩罚; "反向传播" became "反向" and "传". Here each run is cut first, longest index
// word first, and each word is sent followed by 〇, a character the index does not hold, so that
// Material's cut keeps the word whole. Single characters that carry no meaning alone (的, 吗,
// 和 ...) are dropped, as Material's English search drops "the"; 不, 对, 会, 要, 能 and 用 are
// kept ("梯度不对" is not "梯度"). Everything else is Material's worker, unchanged (hooks/search_tuning.py writes this file next to it and points the pages at
// it).
"use strict"
const HAN = /\p{sc=Han}+/gu
const PAD = "\u3007"  // 〇
const STOP = new Set("的了吗呢么啊吧和与及或是在把被也都就还让从为个一".split(""))
let words = new Set()
let longest = 1

function cut(run) {
  const out = []
  for (let i = 0; i < run.length;) {
    let n = Math.min(longest, run.length - i)
    while (n > 1 && !words.has(run.slice(i, i + n))) n--
    const word = run.slice(i, i + n)
    if (!(n === 1 && STOP.has(word))) out.push(word + PAD)
    i += n
  }
  return out.join(" ")
}

function rewrite(message) {
  if (message && message.type === 0) {  // SETUP: learn the index's Chinese words
    words = new Set()
    for (const doc of message.data.docs)
      for (const field of [doc.title, doc.text])
        for (const word of (field || "").match(HAN) || []) words.add(word)
    words.delete(PAD)
    longest = Math.max(1, ...Array.from(words, w => w.length).filter(n => n <= 8))
  } else if (message && message.type === 2 && typeof message.data === "string") {
    const query = message.data.replace(HAN, run => " " + cut(run) + " ").trim()
    // English words that carry no meaning alone (is, do, with ...) leave the query as they
    // leave the index: each query word matches any indexed word it begins, and "is" matched
    // is_grads_batched, "do" does.
    const stop = self.lunr && self.lunr.stopWordFilter
    const kept = query.split(/\s+/).filter(w => !(stop && /^[a-z]+$/i.test(w) && !stop(w.toLowerCase())))
    return { ...message, data: kept.length ? kept.join(" ") : query }
  }
  return message
}

const add = self.addEventListener.bind(self)
self.addEventListener = (type, listener, ...rest) => add(
  type, type === "message" ? ev => listener({ data: rewrite(ev.data) }) : listener, ...rest)
importScripts("__WORKER__")
