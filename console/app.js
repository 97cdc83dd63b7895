// The console's entry: the two views behind the header's tabs (#status, #try), the status poll, and the
// token dialog's button. docs/CONSOLE.md says what each view shows.
import { onTokenState, reopenToken } from './api.js';
import { StatusView } from './status.js';
import { TryView } from './try.js';

const status = new StatusView();
const tryView = new TryView();

function route() {
  const view = location.hash === '#try' ? 'try' : 'status';
  for (const v of ['status', 'try']) {
    document.getElementById(`view-${v}`).hidden = v !== view;
    const tab = document.getElementById(`tab-${v}`);
    tab.classList.toggle('active', v === view);
    if (v === view) tab.setAttribute('aria-current', 'page');
    else tab.removeAttribute('aria-current');
  }
  status.show(view === 'status');
  tryView.show(view === 'try');
}

window.addEventListener('hashchange', route);
document.getElementById('token-button').addEventListener('click', async () => {
  await reopenToken();
  status.poll();
});
onTokenState((state) => {
  document.getElementById('token-button').hidden = state !== 'declined';
});

route();
status.start();
tryView.start();
