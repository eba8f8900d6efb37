// plimsoll UI: makes the interlock verdict live and the run cards copyable. The verdict always
// comes from the daemon (/ui/verdict): this file compares no tiers itself. Without JavaScript
// the form submits and the daemon renders the same verdict into the page.
"use strict";

(function () {
  const select = document.getElementById("floor");
  const form = document.getElementById("floor-form");
  const verdict = document.getElementById("verdict");
  const headline = document.getElementById("verdict-headline");
  const detail = document.getElementById("verdict-detail");
  const card = document.getElementById("verdict-card");
  const floorCap = document.getElementById("floor-cap");
  const gauge = document.getElementById("gauge");
  let asked = 0;

  function show(v) {
    verdict.className = "verdict " + v.state;
    verdict.dataset.state = v.state;
    headline.textContent = v.headline;
    detail.textContent = v.detail;
    card.textContent = v.card;
    card.hidden = v.card === "";
    floorCap.textContent = v.floor === "" ? "not set" : v.floor;
    const order = ["none", "process", "container", "kernel", "vm"];
    for (const li of gauge.querySelectorAll("li")) {
      const t = li.dataset.tier;
      const isFloor = t === v.floor;
      li.classList.toggle("floor", isFloor);
      li.classList.toggle("floor-above", isFloor && order.indexOf(t) > order.indexOf(v.tier));
    }
  }

  async function check() {
    const id = ++asked;
    const floor = select.value;
    try {
      const r = await fetch("/ui/verdict?floor=" + encodeURIComponent(floor),
                            { headers: { Accept: "application/json" }, cache: "no-store" });
      const v = await r.json();
      if (id !== asked) return; // a later choice already answered
      if (!r.ok) {
        headline.textContent = v.message || "The daemon did not understand that floor.";
        return;
      }
      show(v);
      history.replaceState(null, "", floor === "" ? "/ui" : "/ui?floor=" + encodeURIComponent(floor));
    } catch (e) {
      if (id === asked) headline.textContent = "The daemon could not be asked (" + e.message + ").";
    }
  }

  if (select && form) {
    select.addEventListener("change", check);
    form.addEventListener("submit", function (ev) { ev.preventDefault(); check(); });
  }

  for (const b of document.querySelectorAll("button.copy")) {
    const pre = document.getElementById(b.dataset.copy);
    if (!pre) continue;
    b.hidden = false;
    b.addEventListener("click", async function () {
      try {
        await navigator.clipboard.writeText(pre.textContent);
        b.textContent = "Copied";
      } catch (e) {
        // No clipboard permission: select the text so the keyboard can copy it.
        const range = document.createRange();
        range.selectNodeContents(pre);
        const sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        b.textContent = "Selected: press Ctrl+C";
      }
    });
  }
})();
