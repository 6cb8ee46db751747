"""Realistic turn texts for a GraphRAG chat over a financial knowledge graph (60-100 tokens
each, cl100k_base)."""

from __future__ import annotations

QUESTIONS: tuple[str, ...] = (
    "Which of our suppliers in the Finance graph have more than three open invoices past due "
    "by over 60 days, and how much do they owe in total? Please group them by region and show"
    " the account manager responsible for each one, so I can follow up before the quarterly "
    "review next Tuesday. Skip suppliers that already have a payment plan agreed.",
    "Compare the transaction volume of Northwind Trading with Contoso Ltd over the last two "
    "quarters. Did either of them route payments through intermediaries that are flagged in "
    "the sanctions list, and if so, which accounts were involved and when did it happen? A "
    "short table with dates and amounts would be ideal for the compliance team.",
    "I am preparing the audit for the Berlin subsidiary. List the related-party loans issued "
    "since January, their interest rates, and any board member who is connected to the "
    "borrower through a shared directorship or an ownership stake above ten percent. Include "
    "the name of the loan officer who approved each one and the collateral recorded.",
    "Earlier you mentioned the Acme Holdings merger. Which of the entities it absorbed still "
    "have active bank accounts in our graph, and are any of those accounts receiving wire "
    "transfers from counterparties we have not screened yet this year? If there are many, "
    "start with the largest amounts and tell me which team owns the relationship.",
    "Show me the chain of ownership from Globex Capital down to the operating companies in "
    "Singapore. Highlight any shell company with no employees and with revenue under one "
    "hundred thousand dollars, and tell me who signs for it. I also need to know whether the "
    "same signatory appears on accounts of any other company in the graph.",
    "What changed in the credit exposure to the energy sector since last month? Break it down"
    " by counterparty rating, and explain which new edges in the graph drove the increase, "
    "for example new guarantees, new subsidiaries or new supply contracts. Keep it brief; "
    "this goes into the risk committee pack tomorrow morning at nine.",
)

ANSWERS: tuple[str, ...] = (
    "Four suppliers match: Baltic Freight (EMEA, 5 invoices, $182,400, manager J. Weber), "
    "Sunrise Components (APAC, 4 invoices, $96,150, manager L. Tan), Orion Metals (AMER, 4 "
    "invoices, $74,980, manager R. Diaz) and Delta Packaging (EMEA, 6 invoices, $61,300, "
    "manager J. Weber). Together they owe $414,830.",
    "Northwind's volume grew 18% quarter over quarter to $42.1M; Contoso's fell 7% to $35.6M."
    " Two Contoso payments in August ($1.2M and $0.8M) passed through Halden Services, which "
    "is flagged on the EU list since June. Northwind used no flagged intermediaries. The "
    "accounts involved are CT-0042 and CT-0117.",
    "Three related-party loans were issued since January: $2.5M to Kessler GmbH at 3.1%, "
    "$900K to Lindner AG at 4.0% and $400K to Falk Immobilien at 2.2%. Board member Anna Roth"
    " is a director of Kessler GmbH, and Thomas Falk holds 35% of Falk Immobilien through a "
    "family trust.",
    "Of the seven absorbed entities, three still hold active accounts: Acme Logistics (2 "
    "accounts), Acme Retail Europe (1) and Pinnacle Tools (1). Pinnacle Tools received four "
    "wires this year from Marlow Trade Ltd, which has not been screened since 2024. The other"
    " accounts only receive payments from screened counterparties.",
    "The chain is Globex Capital → Globex Asia Holdings (100%) → GA Ventures Pte (80%) → "
    "three operating companies. GA Ventures Pte has no employees and $64K revenue, so it "
    "matches your shell criteria; its authorised signatory is Mei Ling Chua, who also signs "
    "for two unrelated trading firms in the graph.",
    "Exposure to energy rose from $310M to $347M. AA-rated counterparties are flat; the "
    "increase is in BBB (+$29M) and BB (+$8M). It comes mainly from two new guarantees issued"
    " by Helios Power for its new subsidiary Helios Solar Trading, and from a supply contract"
    " between Vantage Oil and our client Norland Chemicals.",
)
