// Long API names in the navigation (ContinuousLogSupermodularDenoiser, calibrate_marginals())
// get line-break opportunities where a word ends -- after "_" or ".", and between a lower-case
// letter and a capital -- so that they wrap there instead of in the middle of a word.
document.addEventListener("DOMContentLoaded", () => {
  const places = ".bd-sidebar-primary a, .bd-sidebar-secondary a, .bd-article h1";
  for (const element of document.querySelectorAll(places)) {
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    const texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    for (const text of texts) {
      const parts = text.data.split(/(?<=[_.])|(?<=[a-z])(?=[A-Z])/);
      if (parts.length < 2) continue;
      const pieces = document.createDocumentFragment();
      parts.forEach((part, i) => {
        if (i > 0) pieces.appendChild(document.createElement("wbr"));
        pieces.appendChild(document.createTextNode(part));
      });
      text.replaceWith(pieces);
    }
  }
});
