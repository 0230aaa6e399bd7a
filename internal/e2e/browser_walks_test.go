package e2e

import "testing"

// TestInABrowser runs the walks through the dashboard and GraphiQL in
// Chromium (the *_browser_test.go files), one after another, beside the
// package's other tests: a walk's Chromium keeps most of a core busy, so
// two at once only slowed each other, and as tests of their own that were
// not parallel they ran alone before every parallel test (go test runs
// those first): about 200 of internal/e2e's 375 s in make test, with the
// CPU partly idle behind them. Run one with
// go test -run 'TestInABrowser/Dashboard_ExtendDuplicateEnable' ./internal/e2e.
func TestInABrowser(t *testing.T) {
	t.Parallel()
	chromiumPath(t) // fails now, not after a walk's set-up, when Chromium is missing
	walks := []struct {
		name string
		walk func(*testing.T)
	}{
		{"ApiKeysPage_AnAdminMakesAKeySeesItOnceAndRevokesIt", walkApiKeysPage_AnAdminMakesAKeySeesItOnceAndRevokesIt},
		{"Dashboard_CampaignFormSetsAPeriodLimit", walkDashboard_CampaignFormSetsAPeriodLimit},
		{"Dashboard_CampaignCreatedWatchedLookedUpAndExported", walkDashboard_CampaignCreatedWatchedLookedUpAndExported},
		{"Dashboard_MarketerCreatesAndWatchesOperatorSeesDrift", walkDashboard_MarketerCreatesAndWatchesOperatorSeesDrift},
		{"Dashboard_ExtendDuplicateEnable", walkDashboard_ExtendDuplicateEnable},
		{"Dashboard_ListsPageWithLiveFiguresAndEveryPageIsAccessible", walkDashboard_ListsPageWithLiveFiguresAndEveryPageIsAccessible},
		{"DeadLetters_OperatorAppliesAgainOrDiscards", walkDeadLetters_OperatorAppliesAgainOrDiscards},
		{"GraphiQL_DocsListReserveVoucher", walkGraphiQL_DocsListReserveVoucher},
		{"VoucherList_ShowsAVoucherCreatedAfterThePageLoaded", walkVoucherList_ShowsAVoucherCreatedAfterThePageLoaded},
		{"SaleChart_TheVoucherPageDrawsTheSaleAndItsCSV", walkSaleChart_TheVoucherPageDrawsTheSaleAndItsCSV},
		{"Users_AdminManagesUsersEndToEnd", walkUsers_AdminManagesUsersEndToEnd},
		{"WebhooksPage_AnAdminAddsTestsResendsDisablesAndDeletesAnEndpoint", walkWebhooksPage_AnAdminAddsTestsResendsDisablesAndDeletesAnEndpoint},
	}
	for _, w := range walks {
		t.Run(w.name, w.walk)
	}
}
